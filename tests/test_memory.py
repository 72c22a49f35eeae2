"""--memory-limit sizes and the merge loop's memory check (`memory`)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.memory import (
    MERGE_BYTES_PER_CJK_SYMBOL,
    MERGE_BYTES_PER_PASS_POSITION,
    MERGE_BYTES_PER_ROOT_CJK_SYMBOL,
    MERGE_BYTES_PER_ROOT_SYMBOL,
    MERGE_BYTES_PER_SYMBOL,
    MERGE_BYTES_PER_WORD,
    ROOT_FROM_SYMBOLS,
    check_merge_memory,
)
from tokcolumnar.sizes import DEFAULT_FRACTION, default_limit, parse_size, physical_memory


@pytest.mark.parametrize(("text", "size"), [
    ("400MB", 400_000_000), ("1.5GB", 1_500_000_000), ("512MiB", 512 << 20),
    ("1000000", 1_000_000), ("2gib", 2 << 30), ("64 kB", 64_000), (".5TB", 500 * 10**9),
    (12345, 12345)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "1.5XB", "-3MB", "0", "1e9", "0.0001B", True])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="--memory-limit"):
        parse_size(text)


def test_default_limit_is_the_documented_fraction_of_ram():
    ram = physical_memory()
    assert ram and default_limit() == int(ram * DEFAULT_FRACTION)


def test_merge_check_names_the_memory_needed_and_max_words():
    words = pl.DataFrame({"word": ["abcd"] * 1000, "count": [1] * 1000})
    need = int(words.estimated_size() + 1000 * MERGE_BYTES_PER_WORD
               + 4000 * MERGE_BYTES_PER_SYMBOL
               + MERGE_BYTES_PER_ROOT_SYMBOL * 4000 / ROOT_FROM_SYMBOLS ** 0.5
               + 2000 * MERGE_BYTES_PER_PASS_POSITION)  # a pass merges at most half the symbols
    check_merge_memory(words, need, vocab_size=30_000)  # fits exactly
    with pytest.raises(TokcolumnarError, match=r"1,000 distinct words .* --max-words 999 "):
        check_merge_memory(words, need - 1, vocab_size=30_000)


def test_cjk_characters_cost_their_own_measured_bytes():
    words = pl.DataFrame({"word": ["ab文字"] * 10, "count": [1] * 10})
    need = int(words.estimated_size() + 10 * MERGE_BYTES_PER_WORD + 20 * MERGE_BYTES_PER_SYMBOL
               + MERGE_BYTES_PER_ROOT_SYMBOL * 20 / ROOT_FROM_SYMBOLS ** 0.5
               + 20 * MERGE_BYTES_PER_CJK_SYMBOL
               + MERGE_BYTES_PER_ROOT_CJK_SYMBOL * 20 / ROOT_FROM_SYMBOLS ** 0.5
               + 20 * MERGE_BYTES_PER_PASS_POSITION)
    check_merge_memory(words, need, vocab_size=30_000)
    with pytest.raises(TokcolumnarError, match="needs about"):
        check_merge_memory(words, need - 1, vocab_size=30_000)


def test_the_pairs_term_grows_as_the_square_root_of_large_tables_only():
    """Above `ROOT_FROM_SYMBOLS` four times the characters cost twice the pairs' term; below,
    it is linear and meets the square root there (a tiny table is not charged megabytes)."""
    from tokcolumnar.memory import symbol_bytes

    def pairs(n: int, cjk: bool = False) -> float:
        linear = MERGE_BYTES_PER_CJK_SYMBOL if cjk else MERGE_BYTES_PER_SYMBOL
        return symbol_bytes(n, n if cjk else 0) - linear * n

    for cjk in (False, True):
        root = MERGE_BYTES_PER_ROOT_CJK_SYMBOL if cjk else MERGE_BYTES_PER_ROOT_SYMBOL
        x = ROOT_FROM_SYMBOLS
        assert pairs(4 * x, cjk) == pytest.approx(2 * pairs(x, cjk), abs=2)
        assert pairs(x, cjk) == pytest.approx(root * x ** 0.5, abs=2)
        assert pairs(x // 4, cjk) == pytest.approx(pairs(x, cjk) / 4, abs=2)
    assert symbol_bytes(5000) < 10**6


def test_wider_ids_and_pair_slots_past_65534_and_65535_tokens():
    """int32 ids past 65,534 tokens, 16-byte pair slots past 65,535 (ids past 65,534)
    (`symbols.symbol_dtype`, `PairCounts(narrow=)`): each costs its bytes per symbol; a run
    of unknown size is estimated as the widest."""
    from tokcolumnar.memory import (
        WIDE_ID_BYTES_PER_SYMBOL,
        WIDE_PAIR_BYTES_PER_SYMBOL,
        merge_bytes,
    )
    from tokcolumnar.training.pairtable import NARROW_ID_MAX
    from tokcolumnar.training.symbols import symbol_dtype

    assert symbol_dtype(256, 65_534) == np.uint16 and symbol_dtype(256, 65_535) == np.int32
    n = 10**6
    narrow = merge_bytes(1000, n, vocab_size=65_534)
    wide_ids = merge_bytes(1000, n, vocab_size=NARROW_ID_MAX + 1)  # ids up to 65,534
    assert wide_ids == narrow + WIDE_ID_BYTES_PER_SYMBOL * n
    assert merge_bytes(1000, n, vocab_size=NARROW_ID_MAX + 2) == (
        wide_ids + WIDE_PAIR_BYTES_PER_SYMBOL * n)
    assert merge_bytes(1000, n) == merge_bytes(1000, n, vocab_size=10**6)


def test_a_pass_counts_at_most_one_chunk_of_temporaries():
    """The estimate's pass term: half the symbols of a small table (one pair can cover them),
    one `passes.PASS_CHUNK` of a large one; a table of long runs of one symbol (the first pass
    merges half of it) is not underestimated."""
    from tokcolumnar.memory import PASS_CHUNK_POSITIONS, merge_bytes, symbol_bytes
    from tokcolumnar.training.passes import PASS_CHUNK

    assert PASS_CHUNK == PASS_CHUNK_POSITIONS
    base = (merge_bytes(1, 10**8, vocab_size=1000) - symbol_bytes(10**8)
            - MERGE_BYTES_PER_WORD)
    assert base == MERGE_BYTES_PER_PASS_POSITION * PASS_CHUNK
    small = (merge_bytes(1, 1000, vocab_size=1000) - symbol_bytes(1000)
             - MERGE_BYTES_PER_WORD)
    assert small == MERGE_BYTES_PER_PASS_POSITION * 500
    # 200 words of 2,000 `x` (400,487 symbols), measured 2026-11-28 at 30k: 50 MB above the
    # table, ~40 MB of it the libraries' first work, which the limit leaves out
    assert merge_bytes(200, 400_487, vocab_size=30_000) >= 10 * 10**6
