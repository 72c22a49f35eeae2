"""The memory budget of a run (`--memory-limit`, `--max-words`; docs/architecture.md, "Memory
and spilling / checkpoints").

* `sizes.parse_size` reads a size (`400MB`, `1.5GB`, `512MiB`, plain bytes); the default limit
  is `sizes.DEFAULT_FRACTION` of physical RAM.
* Counting keeps its running word-count table under `COUNT_TABLE_SHARE` of the limit and spills
  the rest to the work directory (`corpus.spill`).
* The merge loop's memory is a function of the words table: `MERGE_BYTES_PER_WORD` per distinct
  word plus `MERGE_BYTES_PER_SYMBOL` per initial symbol. `check_merge_memory` refuses, before
  the loop, a words table that would not fit; `keep_most_frequent` is `--max-words`.
* The estimate is fitted on natural text; a table whose pairs are rarer (random strings, a huge
  alphabet) can need more. `LoopWatch` therefore watches the loop itself: the process's memory
  beyond what it held when the run started (`resident_bytes`) must stay within the limit, or
  the run stops there with its checkpoint (`--resume` with a larger limit continues).

The limit counts the run's data: not the interpreter and its libraries (~70 MB for the command
line), nor what a caller of the library already held, nor the `LIBRARY_WORK` the libraries'
thread pools and arenas take on their first work, whatever the data."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import polars as pl

from .errors import TokcolumnarError

#: The share of the limit the running word-count table of counting may take before it is
#: spilled. The rest of the limit holds one unit's partial tables (a 64 MiB unit of text), the
#: group-by that folds a unit into the running table (about twice the table at its peak) and
#: the interpreter with its libraries (~150 MB).
COUNT_TABLE_SHARE = 0.2

# The merge loop's memory (BPE loop, Polars engine): the peak resident memory of a whole
# `tokcolumnar train` after its count (initial symbols, merge loop, result tables, the
# outputs' writing; run.json's `memory`, `scripts/check_memory_estimate.py`) above the run's
# start, less `LIBRARY_WORK`, fitted 2026-11-29 (least squares on the relative error) on 11
# runs (the 5 GB mix, measured after, checks it): generated Chinese of `gen_zipf_corpus.py
# zh --seed 0` (100 MB and its first 20 MB) and generated English (1 GB, `--seed 1`) with
# --preset gpt2 (30k; the English at 50k) and the default whitespace (50k / 30k), and
# medium/{en,zh,ja,ru}.txt (gpt2 30k; en, zh, ja whitespace). Measured / estimate (with
# `LIBRARY_WORK`; docs/performance.md, "Memory estimate", has every row), MB:
#   run (words; symbols; CJK of them)             measured  estimate
#   5 GB mix whitespace 50k, in memory              8,088    8,396 (+4%)
#     (14,533,275; 381,029,372; 328,078,448)
#   zh 100 MB gpt2 (1,603,048; 99,720,971)          1,282    1,333 (+4%)
#   zh 100 MB whitespace 50k (1,161,079;            955      984 (+3%)
#     35,560,335; 32,809,206)
#   zh 20 MB gpt2 (316,652; 19,067,456)               388      373 (-4%)
#   zh 20 MB whitespace (221,565; 6,781,424; 6.26M)   285      272 (-5%)
#   en 1 GB gpt2 50k (1,151,775; 10,452,603)          327      341 (+4%; the count's 440 is
#                                                               that run's peak)
#   medium/zh gpt2 / whitespace 50k                   288/226  296/235
#   medium/ja gpt2 / whitespace                       194/136  189/147
#   medium/ru gpt2, medium/en whitespace              121/92   131/103
# Per symbol a loop holds a few bytes of layout and queue positions (`MERGE_BYTES_PER_SYMBOL`,
# more for CJK characters: a large alphabet, more distinct pairs per character), and its pairs'
# structures (the pair table, queue entries, the passes' keys) grow with the distinct pairs,
# which grow as about the square root of the symbols (Heaps' law): `MERGE_BYTES_PER_ROOT_SYMBOL`
# times the square root. A vocabulary past 65,534 tokens holds int32 ids (2 bytes more per
# position, and its passes' copies: ~3 in all), one past 65,535 a pair table of 16-byte
# slots instead of 8 (~3 more). The words table itself (`estimated_size`) is counted once: the
# loop drops it, the result tables hold it again. This is the ONE place these numbers live:
# remeasure (`scripts/check_memory_estimate.py`) when the loop's layout changes.
MERGE_BYTES_PER_WORD = 48
MERGE_BYTES_PER_SYMBOL = 7.2
MERGE_BYTES_PER_CJK_SYMBOL = 12.7
MERGE_BYTES_PER_ROOT_SYMBOL = 24_500
MERGE_BYTES_PER_ROOT_CJK_SYMBOL = 27_000
#: Below this many symbols (the fit's smallest table had 730,918) the square-root term grows
#: linearly, to its value here: from zero a square root would give a table of 5,000 characters
#: 1.7 MB of pairs' structures, more than a whole small run measures.
ROOT_FROM_SYMBOLS = 100_000
#: A vocabulary past `NARROW_IDS` tokens: int32 ids in the layout and the passes' copies.
WIDE_ID_BYTES_PER_SYMBOL = 3
#: The largest vocabulary whose ids a uint16 layout holds (`training.symbols.symbol_dtype`:
#: ids 0..65,533; 65,534 and 65,535 are its marks, `layout.marks`).
NARROW_IDS = (1 << 16) - 2
#: A vocabulary past `NARROW_PAIR_IDS` tokens: the pair table's 16-byte slots.
WIDE_PAIR_BYTES_PER_SYMBOL = 3
NARROW_PAIR_IDS = (1 << 16) - 1
#: A merge pass's temporaries per position it merges (gathers, the changes' keys and weights,
#: their sums), at most `passes.PASS_CHUNK` positions at once. Negligible beside a large
#: table's state, they are most of a small table's loop when one pair covers much of it: 200
#: words of 2,000 `x` (400,487 symbols) took ~10 MB beyond the libraries' first work
#: (2026-11-28), where the per-symbol terms alone give 6.4 (18 since the 2026-11-29 refit).
MERGE_BYTES_PER_PASS_POSITION = 24
#: The most positions a merge pass merges at once (`passes.PASS_CHUNK`).
PASS_CHUNK_POSITIONS = 1 << 18
#: With its state on disk (`ondisk`: the layout, the queue's positions and the pair table in
#: files of the work directory), what the loop keeps in memory: per word, the heap and the
#: live entries of its queued pairs, the cold store, the vocabulary; per symbol, what a pass
#: over a batch of millions of positions holds at once (its positions, members and words, the
#: bounds' chunks), the queue's bases too small for a file and the grouping's masks.
#: The words table is counted too: the loop drops it (`tables.CountedWords`), but the count
#: before the loop and the result tables after it hold it. Measured 2026-11-28 on 5 GB of
#: generated text (4 GB English, 1 GB Chinese, whitespace, 50k: 14,533,275 words, 381,029,372
#: characters, 328,078,448 of them CJK, table 1.27 GB) under `--memory-limit 4GB`: the
#: process's own memory (RssAnon) peaked at 3.01 GB (the count's end), 1.92 GB in the loop and
#: 2.5 GB in the result tables, against 3.14 GB by these constants; on 100 MB of generated
#: Chinese (byte-level, 30k; before the uint8 spans and the dropped words table) 0.61 GB
#: against 0.66 GB.
ONDISK_BYTES_PER_WORD = 24
ONDISK_BYTES_PER_SYMBOL = 4
#: The characters counted at `MERGE_BYTES_PER_CJK_SYMBOL`.
CJK = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"

#: What Polars' and NumPy's thread pools and allocator arenas take on their first work, whatever
#: the data (measured 30-60 MB beyond the resident memory at a run's start: medium/en.txt's
#: whole run at 30k holds 87 MB beyond it, of which 23 MB is data). Not counted in the limit.
LIBRARY_WORK = 64 * 10**6


def resident_bytes() -> int | None:
    """The process's resident memory now (None where /proc does not say)."""
    both = resident_and_file_bytes()
    return None if both is None else both[0]


def resident_and_file_bytes() -> tuple[int, int] | None:
    """The process's resident memory now and the part of it that is files' pages (statm's
    resident and shared fields), or None where /proc does not say."""
    try:
        with open("/proc/self/statm", "rb") as f:
            fields = f.read().split()
        page = os.sysconf("SC_PAGE_SIZE")
        return int(fields[1]) * page, int(fields[2]) * page
    except (OSError, ValueError, IndexError):
        return None


def anonymous_resident_bytes() -> int | None:
    """The process's resident memory that is not a file's pages (RssAnon), or None where
    /proc does not say."""
    return _status_bytes(b"RssAnon:")


def peak_resident_bytes() -> int | None:
    """The process's peak resident memory so far (VmHWM), or None where /proc does not say.
    (It is never reset here: Linux can, but the peak a parent reads with wait4 would then
    miss what came before.)"""
    return _status_bytes(b"VmHWM:")


def _status_bytes(field: bytes) -> int | None:
    """A size field of /proc/self/status in bytes (None where /proc does not say)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class LoopWatch:
    """Watches a merge loop against `limit` bytes of data beyond `floor` (the process's
    resident memory when the run started) and `LIBRARY_WORK`: `over`, called before each
    pass, says how much data the run holds once that passed the limit. It reads the
    resident memory, and the process's peak once that passed the peak before the loop (then
    it is the loop's, a pass's transients included); at most every `every` seconds (a read
    of /proc costs ~20 microseconds)."""

    every = 0.05

    def __init__(self, limit: int, floor: int | None) -> None:
        self.limit, self.floor = limit, floor
        self.peak_before = peak_resident_bytes() or 0
        self.last = 0.0
        #: the loop's state is on disk (`ondisk`): its mapped pages are the page cache's, and
        #: only the process's own memory (RssAnon) is watched
        self.anonymous = False

    def over(self) -> int | None:
        """The loop's memory beyond the floor when it passed the limit, else None."""
        if self.floor is None:
            return None
        now = time.monotonic()
        if now - self.last < self.every:
            return None
        self.last = now
        if self.anonymous:
            used = anonymous_resident_bytes() or 0
        else:
            peak = peak_resident_bytes() or 0
            used = max(resident_bytes() or 0, peak if peak > self.peak_before else 0)
        if used - self.floor - LIBRARY_WORK <= self.limit:
            return None
        return used - self.floor - LIBRARY_WORK

    def refuse(self, used: int, merges: int) -> MemoryLimitError:
        """The error that stops the loop, after `merges` merges."""
        return MemoryLimitError(
            f"the merge loop passed --memory-limit {format_size(self.limit)} after {merges:,} "
            f"merges (its data took {format_size(used)}; its pairs are rarer than the "
            "estimate before the loop assumed): raise --memory-limit")


class MemoryLimitError(TokcolumnarError):
    """The words table would not fit the limit (the run's work directory is kept: `--resume`
    with a larger limit does not count again)."""


def format_size(n: float, up: bool = False) -> str:
    """Bytes for messages: 1.50 GB, 420 MB, 12 kB (decimal units, as --memory-limit reads).
    `up` rounds up, for a size the user is told to give: `--memory-limit` of what is shown is
    then at least `n`."""
    for unit, size, places in (("GB", 10**9, 2), ("MB", 10**6, 0), ("kB", 10**3, 0)):
        if n >= size:
            value = n / size
            if up:
                value = math.ceil(value * 10**places) / 10**places
            return f"{value:.{places}f} {unit}"
    return f"{math.ceil(n) if up else int(n)} B"


def merge_bytes(n_words: int, n_symbols: int, n_cjk: int = 0, table_bytes: int = 0,
                vocab_size: int | None = None) -> int:
    """The merge loop's estimated memory for a words table of `n_words` words holding
    `n_symbols` characters in all, `n_cjk` of them CJK, taking `table_bytes` itself, trained to
    `vocab_size` tokens (None: as wide as any; see the constants above). The interpreter and
    its libraries (~150 MB, and ~40 MB of their first work) are not counted: a limit below them
    could not be met by any table, and small budgets that make counting spill rely on it."""
    wide = 0
    if vocab_size is None or vocab_size > NARROW_IDS:
        wide += WIDE_ID_BYTES_PER_SYMBOL
    if vocab_size is None or vocab_size > NARROW_PAIR_IDS:
        wide += WIDE_PAIR_BYTES_PER_SYMBOL
    return (table_bytes + MERGE_BYTES_PER_WORD * n_words + wide * n_symbols
            + symbol_bytes(n_symbols, n_cjk)
            + MERGE_BYTES_PER_PASS_POSITION * min(n_symbols // 2, PASS_CHUNK_POSITIONS))


def symbol_bytes(n_symbols: int, n_cjk: int = 0) -> int:
    """The merge loop's memory for `n_symbols` symbols, `n_cjk` of them CJK characters: a few
    bytes each, and the pairs' structures, which grow as their square root (see the
    constants above)."""
    other = n_symbols - n_cjk
    return int(MERGE_BYTES_PER_SYMBOL * other + MERGE_BYTES_PER_CJK_SYMBOL * n_cjk
               + MERGE_BYTES_PER_ROOT_SYMBOL * _root(other)
               + MERGE_BYTES_PER_ROOT_CJK_SYMBOL * _root(n_cjk))


def _root(n: int) -> float:
    """The square root of `n`, linear below `ROOT_FROM_SYMBOLS` (to the same value there)."""
    return math.sqrt(n) if n >= ROOT_FROM_SYMBOLS else n / math.sqrt(ROOT_FROM_SYMBOLS)


def ondisk_merge_bytes(n_words: int, n_symbols: int, table_bytes: int = 0) -> int:
    """The memory the merge loop needs with its state on disk (`ondisk`): `merge_bytes` with
    the per-symbol state left to the files."""
    return (table_bytes + ONDISK_BYTES_PER_WORD * n_words + ONDISK_BYTES_PER_SYMBOL * n_symbols
            + MERGE_BYTES_PER_PASS_POSITION * min(n_symbols // 2, PASS_CHUNK_POSITIONS))


def _sizes(words: pl.DataFrame) -> tuple[int, int]:
    """The characters of a words table's words, and how many of them are CJK."""
    sizes = words.select(pl.col("word").str.len_chars().sum().alias("symbols"),
                         pl.col("word").str.count_matches(CJK).sum().alias("cjk"))
    return int(sizes.item(0, "symbols") or 0), int(sizes.item(0, "cjk") or 0)


def table_merge_bytes(words: pl.DataFrame, vocab_size: int | None = None) -> int:
    """`merge_bytes` of a words table."""
    n_symbols, n_cjk = _sizes(words)
    return merge_bytes(words.height, n_symbols, n_cjk, words.estimated_size(), vocab_size)


def max_words_that_fit(words: pl.DataFrame, limit: int, vocab_size: int | None = None) -> int:
    """The largest N whose `--max-words N` table (`keep_most_frequent`) fits `limit` by
    `merge_bytes`, 0 when not even the most frequent word does: a binary search over the
    prefixes of the table in the order `keep_most_frequent` keeps words in, then the answer
    checked on the kept table itself (lowered until it fits), so that the refusal's advice is
    a value the run then accepts."""
    tie = "first_seen" if "first_seen" in words.columns else "word"
    order = words.sort(["count", tie], descending=[True, False])
    lo, hi = 0, words.height  # the first `lo` words fit; more than `hi` do not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if table_merge_bytes(order.head(mid), vocab_size) <= limit:
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and table_merge_bytes(keep_most_frequent(words, lo), vocab_size) > limit:
        lo = lo * 99 // 100
    return lo


@dataclass(frozen=True)
class LoopPlan:
    """Where a merge loop keeps its state (`check_merge_memory`'s answer): the loop's
    estimated data in memory and on disk (bytes, the words table included; run.json's
    `memory`), and whether it runs with its state in the work directory."""

    in_memory: int
    on_disk: int
    disk: bool

    @property
    def estimate(self) -> int:
        """The estimate of the loop that runs: on disk or in memory."""
        return self.on_disk if self.disk else self.in_memory


@dataclass
class RunMemory:
    """What a run held of the machine's memory (run.json's `memory`): `--memory-limit`, the
    resident memory when it started (the limit counts what the run adds to it), the merge
    loop's plan (None: an engine that does not check, or no merge loop) and the process's
    peak resident memory as each stage ended (`progress.StageTimer.high_water`)."""

    limit: int
    start: int | None
    plan: LoopPlan | None
    high_water: dict[str, int]

    def record(self) -> dict[str, object]:
        """run.json's `memory` (bytes), its peak read now: the run is writing its outputs."""
        plan = self.plan
        return {"limit": self.limit, "start_rss": self.start,
                "loop_estimate": None if plan is None else plan.estimate,
                "loop_estimate_in_memory": None if plan is None else plan.in_memory,
                "loop_estimate_on_disk": None if plan is None else plan.on_disk,
                "peak_rss": peak_resident_bytes(),
                "peak_rss_after": dict(self.high_water)}


def check_merge_memory(words: pl.DataFrame, limit: int, disk: bool = False,
                       vocab_size: int | None = None) -> LoopPlan:
    """Where the merge loop on a words table keeps its state to fit in `limit`: in memory, or
    on disk when it must and can (`disk`: the run has a work directory); refuse, before the
    loop, a table that fits neither way: one line naming the memory needed and, when one
    does, the --max-words that would fit."""
    n_words = words.height
    n_symbols, n_cjk = _sizes(words)
    need = merge_bytes(n_words, n_symbols, n_cjk, words.estimated_size(), vocab_size)
    on_disk = ondisk_merge_bytes(n_words, n_symbols, words.estimated_size())
    if need <= limit:
        return LoopPlan(need, on_disk, False)
    if disk and on_disk <= limit:
        return LoopPlan(need, on_disk, True)
    least = on_disk if disk else need  # the least any run of this table needs
    fits = max_words_that_fit(words, limit, vocab_size)
    # --max-words must be positive: advise it only when some words fit
    fewer = (f", or pass --max-words {fits:,} (or fewer) to keep the most frequent words (an "
             "approximation)" if fits > 0 else
             " (not even the most frequent word fits, so --max-words cannot help)")
    raise MemoryLimitError(
        f"the merge loop on {n_words:,} distinct words ({n_symbols:,} characters) needs about "
        f"{format_size(least)}{' even with its state on disk' if disk else ''}, over "
        f"--memory-limit {format_size(limit)}: raise --memory-limit to at least "
        f"{format_size(least, up=True)}{fewer}")


def keep_most_frequent(words: pl.DataFrame, max_words: int | None, tie: str | None = None
                       ) -> pl.DataFrame:
    """`--max-words N`: the N most frequent words; among equal counts the one seen first
    (smallest first_seen; by word, byte order, without first_seen; `tie`: another column
    ordered as first_seen) is kept. The table keeps its row order."""
    if max_words is None or words.height <= max_words:
        return words
    if tie is None:
        tie = "first_seen" if "first_seen" in words.columns else "word"
    kept = words.with_row_index("_row").sort(["count", tie], descending=[True, False]
                                             ).head(max_words)
    return kept.sort("_row").drop("_row")
