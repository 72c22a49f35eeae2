"""Unigram training: SentencePiece's algorithm (docs/unigram.md) as columnar passes.

The normalized sentences go in (SentencePiece's order, with counts); the pieces and their float32
scores come out, equal bit for bit to `spm_train --model_type=unigram`'s (sentencepiece 0.2.3)
and to the plain-Python oracle (tests/support/unigram_oracle.py) on the same input. No Python
loop runs over words, sentences or lattice nodes: loops run over substring lengths (the seeds),
the steps of a fold (at most the nodes of the longest word) and the length of a float32 sum
chain (see `unigram_lattice`).

The lattices of all distinct words are flat arrays (`unigram_lattice.LatticeBase`): one row per
node, positions numbered word after word. They are built once for the seed pieces (a trie of
the seeds walked over the words) and each EM iteration only keeps the nodes of the current
pieces. Float arithmetic follows SentencePiece's: float32 where it uses `float`, float64 where
it uses `double`, sums in its order, its threads included (word i is summed by thread i mod
`num_threads`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tokcolumnar.malloc import release_free_heap
from tokcolumnar.text.unicode_scripts import SCRIPT_NAMES, SCRIPT_RANGES
from tokcolumnar.training.passes import side_thread
from tokcolumnar.training.unigram_lattice import (  # noqa: F401 (re-exported)
    LatticeBase,
    Lattices,
    SeedTrie,
    code_point_batches,
    code_points,
    log_sum_exp,
    sequential_f32_sums,
    stable_argsort,
    thread_sums,
)
from tokcolumnar.training.unigram_log import (
    EM,
    FINAL_CUT,
    KEPT,
    LOSS,
    NEVER_BEST,
    UNREACHABLE,
    UNUSED,
    DropLog,
    EMStep,
    PruneStep,
    Pruning,
    UnigramTrace,
)
from tokcolumnar.training.unigram_options import UnigramOptions  # noqa: F401 (re-exported)

WS = "\u2581"  # the escaped space
UNK_CHAR = "\u2585"  # stands for a character outside the required ones
BOUNDARY_CHAR = "\x1f"  # the pre-tokenization boundary: never in a piece, never required

F32 = np.float32
F64 = np.float64

_WS, _UNK, _BOUNDARY = ord(WS), ord(UNK_CHAR), ord(BOUNDARY_CHAR)
_STARTS = np.array([a for a, _, _ in SCRIPT_RANGES], dtype=np.int64)
_ENDS = np.array([b for _, b, _ in SCRIPT_RANGES], dtype=np.int64)
_SCRIPTS = np.array([s for _, _, s in SCRIPT_RANGES], dtype=np.int64)
_HAN, _HIRAGANA, _KATAKANA, _INHERITED = (SCRIPT_NAMES.index(n) for n in
                                           ("Han", "Hiragana", "Katakana", "Inherited"))
_ANY = -1  # matches every script (digits with split_by_number=False)


@dataclass
class UnigramResult:
    pieces: list[str]  # the trained pieces in id order (meta pieces not included)
    scores: np.ndarray  # their float32 scores
    rounds: pl.DataFrame  # one row per EM round: sizes after EM and after pruning
    pruned: pl.DataFrame  # one row per piece dropped (unigram_log.SCHEMA): pruned.parquet


class UnigramError(ValueError):
    """The corpus cannot give the asked vocabulary (SentencePiece's own checks)."""


# --- SentencePiece's float functions ------------------------------------------------------

def digamma(x: np.ndarray) -> np.ndarray:
    """SentencePiece's Digamma (double): the recurrence up to 7, then the asymptotic series."""
    x = np.asarray(x, dtype=F64).copy()
    result = np.zeros_like(x)
    for _ in range(8):
        m = x < 7
        if not m.any():
            break
        result[m] -= 1 / x[m]
        x[m] += 1
    x -= 1.0 / 2.0
    xx = 1.0 / x
    xx2 = xx * xx
    xx4 = xx2 * xx2
    result += (np.log(x) + (1.0 / 24.0) * xx2 - (7.0 / 960.0) * xx4
               + (31.0 / 8064.0) * xx4 * xx2 - (127.0 / 30720.0) * xx4 * xx4)
    return result


def to_log_prob(values: np.ndarray) -> np.ndarray:
    """ToLogProb: a double sum of the float values in order, then float(log(v) - log(sum))."""
    v = values.astype(F32).astype(F64)
    logsum = np.log(np.cumsum(v)[-1])  # cumsum: a sequential sum, as the C++ loop
    return (np.log(v) - logsum).astype(F32)


# --- text as code points -----------------------------------------------------------------------

def lead_byte(cp: np.ndarray) -> np.ndarray:
    """The first UTF-8 byte of each code point."""
    return np.select([cp < 0x80, cp < 0x800, cp < 0x10000],
                     [cp, 0xC0 | (cp >> 6), 0xE0 | (cp >> 12)], 0xF0 | (cp >> 18))


def scripts(cp: np.ndarray, opts: UnigramOptions) -> np.ndarray:
    """Each character's script for the validity check: SentencePiece's Unicode 9 table,
    Hiragana/Katakana/U+30FC as Han, `_INHERITED` kept, digits `_ANY` unless split_by_number."""
    i = np.searchsorted(_STARTS, cp, side="right") - 1
    inside = (i >= 0) & (cp <= _ENDS[np.maximum(i, 0)])
    s = np.where(inside, _SCRIPTS[np.maximum(i, 0)], 0)
    s = np.where((s == _HIRAGANA) | (s == _KATAKANA) | (cp == 0x30FC), _HAN, s)
    if not opts.split_by_number:
        s = np.where(is_decimal(cp), _ANY, s)
    return s


def is_decimal(cp: np.ndarray) -> np.ndarray:
    return ((cp >= 0x30) & (cp <= 0x39)) | ((cp >= 0xFF10) & (cp <= 0xFF19))


# --- loading: SentencePiece's line filter and whitespace handling ------------------------------

def sentencepiece_whitespace(text: pl.Expr, add_dummy_prefix: bool = True) -> pl.Expr:
    """SentencePiece's normalizer after its rule (`remove_extra_whitespaces`,
    `add_dummy_prefix`, `escape_whitespaces`): spaces (U+0020 only) stripped at both ends,
    runs collapsed, one in front, all written `▁`; then every `▁` at the end goes, those of
    the text included (SentencePiece strips the escaped result). An all-space text becomes
    empty."""
    body = text.str.strip_chars(" ").str.replace_all(" +", WS)
    if add_dummy_prefix:
        body = pl.when(body == "").then(pl.lit("")).otherwise(WS + body)
    return body.str.strip_chars_end(WS)


#: SentencePiece's meta pieces by default (`<unk>`, `<s>`, `</s>`: ids 0, 1, 2).
META_PIECES = ("<unk>", "<s>", "</s>")


def replace_meta_pieces(text: pl.Expr, meta_pieces: tuple[str, ...] | list[str]) -> pl.Expr:
    """Every meta piece written in the text replaced by U+001F (`PrefixMatcher::
    GlobalReplace`: the longest match at each position, left to right, which is a
    leftmost-first match over the pieces longest first)."""
    if not meta_pieces:
        return text
    meta = sorted(meta_pieces, key=len, reverse=True)
    return text.str.replace_many(meta, [BOUNDARY_CHAR] * len(meta), leftmost=True)


def load_sentences(lines: pl.Series, max_sentence_length: int = 4192,
                   normalize=sentencepiece_whitespace,
                   meta_pieces: tuple[str, ...] | list[str] = META_PIECES) -> pl.Series:
    """The sentences SentencePiece trains on, in its order: lines that are empty, longer than
    `max_sentence_length` bytes or contain `▅` are skipped, the others normalized
    (`normalize`: an expression on the text) and every meta piece written in them (`<unk>`,
    `<s>`, `</s>`, and the byte pieces with byte fallback) replaced by the boundary character
    U+001F, as `PrefixMatcher::GlobalReplace` does (the longest match at each position, left
    to right: leftmost-first over the pieces longest first); sentences normalized to nothing
    are removed by swapping the last sentence into their place (docs/unigram.md, 1.2-1.3)."""
    kept = (pl.DataFrame({"line": lines}, schema={"line": pl.String})
            .filter((pl.col("line") != "") & (pl.col("line").str.len_bytes()
                                               <= max_sentence_length)
                    & ~pl.col("line").str.contains(UNK_CHAR, literal=True))
            .select(replace_meta_pieces(normalize(pl.col("line")), meta_pieces)
                    .alias("sentence"))["sentence"])
    empty = (kept == "").to_numpy()
    if not empty.any():
        return kept
    order = np.arange(len(kept))
    size = len(kept)
    i = int(np.argmax(empty))
    # only the empties are visited: the loop runs once per removed sentence
    while i < size:
        if empty[order[i]]:
            order[i] = order[size - 1]
            size -= 1
            continue
        rest = empty[order[i:size]]
        if not rest.any():
            break
        i += int(np.argmax(rest))
    return kept.gather(order[:size])


# --- loading: required characters -------------------------------------------------------------

def char_counts(cp: np.ndarray, weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The distinct code points (ascending) and their summed weights (1 each when None): one
    `bincount` over the code points (no sort of the corpus' characters, which `np.unique` did:
    ~5x the time on 5 MB); exact, the weights being integer counts."""
    if not len(cp):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if weight is None or (weight == 1).all():
        n = np.bincount(cp)
    else:
        n = np.rint(np.bincount(cp, weights=weight.astype(np.float64))).astype(np.int64)
    chars = np.flatnonzero(n)
    return chars, n[chars].astype(np.int64)


def char_totals(strings: pl.Series, counts: np.ndarray | None = None,
                select=None) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - a callable
    """`char_counts` of the characters of `strings`, each weighted by its string's count (1
    each when None), only those `select(code points)` keeps (all when None; a test of each
    distinct code point, applied to the totals): summed over runs of strings
    (`code_point_batches`), with no array of the corpus' characters (27 MB of English: its
    code points, a mask and their selection took ~250 MiB). Exact: integer counts."""
    total = np.zeros(0, np.int64)
    weighted = counts is not None and not (counts == 1).all()
    for a, cp, off in code_point_batches(strings):
        weight = np.repeat(counts[a:a + len(off) - 1].astype(np.int64), np.diff(off)) \
            if weighted else None
        chars, n = char_counts(cp, weight)
        if len(chars) and chars[-1] >= len(total):
            total = np.r_[total, np.zeros(int(chars[-1]) + 1 - len(total), np.int64)]
        total[chars] += n
    chars = np.flatnonzero(total)
    if select is not None:
        chars = chars[select(chars)]
    return chars, total[chars]


def required_characters(sentences: pl.Series, counts: np.ndarray,
                        opts: UnigramOptions) -> pl.DataFrame:
    """The required characters (char, count) in (count desc, code point asc) order: taken while
    the coverage before them is below `character_coverage` (docs/unigram.md, 1.4)."""
    chars, n = char_totals(sentences, counts, lambda cp: (
        (cp != 0) & (cp != 0x20) & ((cp < 0xD800) | ((cp >= 0xE000) & (cp <= 0x10FFFF)))))
    order = np.lexsort((chars, -n))
    chars, n = chars[order], n[order]
    total = n.sum()
    before = np.cumsum(n) - n
    coverage = (before / total).astype(F32) if total else np.zeros(0, F32)
    stop = np.flatnonzero(coverage >= F32(opts.character_coverage))
    keep = slice(0, stop[0] if len(stop) else len(chars))
    chars, n = chars[keep], n[keep]
    not_boundary = chars != _BOUNDARY
    return pl.DataFrame({"cp": chars[not_boundary], "count": n[not_boundary]})


def replace_rare(sentences: pl.Series, required: pl.DataFrame) -> pl.Series:
    """Every character outside the required ones becomes `▅`, a run of sentences at a time
    (`code_point_batches`)."""
    req = required["cp"].to_numpy()
    # a table over the code points (one gather per character, where `np.isin` sorted)
    known = np.zeros(0x110000, bool)
    known[req] = True
    hits, fixed = [], []
    for a, cp, off in code_point_batches(sentences):
        rare = ~known[cp]
        if not rare.any():
            continue
        # only the sentences holding a rare character are rebuilt (Python slices of one
        # string: constant time each, where Polars' `str.slice` of one long literal counted
        # characters from its start every time, quadratic: 40 of 60 s on 5 MB)
        hit = np.unique(np.repeat(np.arange(len(off) - 1), np.diff(off))[rare])
        text = np.where(rare, _UNK, cp).astype(np.uint32).tobytes().decode("utf-32-le")
        fixed += [text[off[i]:off[i + 1]] for i in hit.tolist()]
        hits.append(hit + a)
    if not hits:
        return sentences
    return sentences.clone().scatter(np.concatenate(hits), pl.Series(fixed, dtype=pl.String))


# --- words and substrings ----------------------------------------------------------------------

WORD_RE = "▁[^▁]*|[^▁]+"  # SplitIntoWords: a word starts at the text's start and at each ▁


def split_words(sentences: pl.Series) -> pl.Series:
    """Each sentence's words (`WORD_RE`: one before each `▁`, and one at the start) as a list.
    A split at a NUL put before every `▁` (only the first word can then be empty; it is
    dropped), which takes ~half the time of the regex's `extract_all`; the regex where the
    text holds a NUL of its own."""
    if sentences.str.contains("\x00", literal=True).any():
        return sentences.str.extract_all(WORD_RE)
    words = sentences.str.replace_all(WS, "\x00" + WS, literal=True).str.split("\x00")
    return pl.select(pl.when(words.list.first() == "").then(words.list.slice(1))
                     .otherwise(words)).to_series().alias(sentences.name)


def word_tokens(sentences: pl.Series, counts: np.ndarray) -> pl.DataFrame:
    """Every word of every sentence (in order) with: its count, whether it ends its sentence,
    and for a sentence's last word the first byte after the sentence's NUL in the seed text
    (the sentence's own first character for its count - 1 repeats, the next sentence's for the
    last repeat, 256 for the end of the text)."""
    n = len(sentences)
    firsts = lead_byte(code_points(sentences.str.slice(0, 1))[0])
    nxt = np.r_[firsts[1:], 256] if n else np.zeros(0, np.int64)
    return (pl.DataFrame({"sentence": np.arange(n), "words": split_words(sentences),
                          "count": counts.astype(np.int64), "own_next": firsts, "next": nxt})
            .with_columns(last=pl.col("words").list.len() - 1)
            .with_columns(pos=pl.int_ranges(0, pl.col("words").list.len()))
            .explode("words", "pos")
            .rename({"words": "word"})
            .with_columns(final=pl.col("pos") == pl.col("last")))


# --- seeds -------------------------------------------------------------------------------------

def seed_pieces(sentences: pl.Series, counts: np.ndarray, opts: UnigramOptions,
                tokens: pl.DataFrame | None = None) -> pl.DataFrame:
    """The seed pieces (piece, score) in SentencePiece's order: the characters, then the
    frequent substrings of the suffix array, scored by ToLogProb (docs/unigram.md, 2).
    `tokens`: the sentences' `word_tokens`, when already at hand."""
    chars, n = char_totals(sentences, counts, lambda cp: (cp != _UNK) & (cp != _BOUNDARY))
    order = np.lexsort((chars, -n))
    char_seeds = pl.DataFrame({"piece": [chr(c) for c in chars[order]],
                               "value": n[order].astype(F32)},
                              schema={"piece": pl.String, "value": pl.Float32})
    subs = substring_seeds(sentences, counts, opts, tokens)
    seeds = pl.concat([char_seeds, subs.select("piece", "value")])
    return seeds.with_columns(score=pl.Series(to_log_prob(seeds["value"].to_numpy())))


def substring_seeds(sentences: pl.Series, counts: np.ndarray, opts: UnigramOptions,
                    tokens: pl.DataFrame | None = None) -> pl.DataFrame:
    """The substrings SentencePiece's LCP intervals give, without a suffix array: a substring
    `s` of a word (pieces cannot cross `▁`) is an interval of the byte text when the first
    bytes after its occurrences differ (`freq` = its occurrences), and `s` + NUL is one when
    `s` ends 2+ sentences whose next bytes differ; both frequencies add up.

    One length at a time over every start position of the distinct (word, sentence-final?)
    pairs, the substrings as integer ids (a length-l substring's id from its prefix's id and
    its last character, by a radix sort): its occurrences are a `bincount`, and "the next
    bytes differ" is min != max over its occurrences. A position whose substring is not a
    valid piece (validity only gets lost as it grows: scripts, `▁`, forbidden characters,
    running state per position) or occurs less than twice (so do all its extensions) is
    dropped; only the candidates' strings are built."""
    if tokens is None:
        tokens = word_tokens(sentences, counts)
    kinds = tokens.group_by("word", "final", maintain_order=True).agg(pl.col("count").sum())
    words = kinds["word"]
    cp, off = code_points(words)
    kind_count = kinds["count"].to_numpy().astype(np.int64)
    kind_final = kinds["final"].to_numpy()
    # after a sentence's NUL: its own first byte (count - 1 repeats), then the next one's;
    # per final word, the repeats and the smallest and largest of those bytes
    final = tokens.filter(pl.col("final"))
    afters = (pl.concat([final.select("word", after="own_next", n=pl.col("count") - 1),
                         final.select("word", after="next", n=pl.lit(1, pl.Int64))])
              .filter(pl.col("n") > 0)
              .group_by("word").agg(n=pl.col("n").sum(), lo=pl.col("after").min(),
                                    hi=pl.col("after").max()))
    ends = (kinds.select("word", "final").join(afters, on="word", how="left",
                                               maintain_order="left")
            .select(n=pl.when(pl.col("final")).then(pl.col("n")).fill_null(0),
                    lo=pl.col("lo").fill_null(0), hi=pl.col("hi").fill_null(0)))
    end_n, end_lo, end_hi = (ends[c].to_numpy().astype(np.int64) for c in ("n", "lo", "hi"))
    word_of = np.repeat(np.arange(len(words)), np.diff(off))
    wend = off[1:][word_of]
    sc = scripts(cp, opts)
    bad = ((cp == _UNK) | (cp == 0) | (cp == _BOUNDARY) | (cp == 0x20)
           | ((cp >= 0xD800) & (cp < 0xE000)) | (cp > 0x10FFFF))
    ws = cp == _WS
    digit = is_decimal(cp)
    lead = lead_byte(cp)
    # each character's rank among the distinct ones (`np.unique(..., return_inverse=True)`
    # without its sort of every character: a table over the code points)
    chars = char_counts(cp, None)[0]
    rank_of = np.zeros(int(chars[-1]) + 1 if len(chars) else 1, np.int64)
    rank_of[chars] = np.arange(len(chars))
    char_id = rank_of[cp]
    del rank_of
    pos = np.arange(len(cp))
    state = np.full(len(cp), _ANY, dtype=np.int64)  # the script so far (none yet: any)
    has_digit = np.zeros(len(cp), dtype=bool)
    sub = np.zeros(len(cp), np.int64)  # the id of each position's substring so far
    found = []  # (word, start, length, occurrences) of each candidate
    for length in range(1, opts.max_sentencepiece_length + 1):
        live = pos + length <= wend
        pos, wend, sub = pos[live], wend[live], sub[live]
        state, has_digit = state[live], has_digit[live]
        if not len(pos):
            break
        q = pos + length - 1
        valid = ~bad[q] & ~(ws[q] & (length > 1))
        base = ~ws[q] & (sc[q] != _INHERITED)
        s = sc[q]
        if opts.split_by_unicode_script:
            valid &= ~(base & (state != _ANY) & (s != _ANY) & (state != s))
        has_digit |= digit[q]
        if opts.split_digits and length > 1:
            valid &= ~has_digit
        pos, q, wend, sub = pos[valid], q[valid], wend[valid], sub[valid]
        state, has_digit = np.where(base, s, state)[valid], has_digit[valid]
        if not len(pos):
            break
        # the substrings' ids: by (prefix id, last character), rows grouped by id
        key = sub * len(chars) + char_id[q]
        order = stable_argsort(key)
        k = key[order]
        head = np.r_[True, k[1:] != k[:-1]]
        sub = np.empty(len(k), np.int64)
        sub[order] = np.cumsum(head) - 1
        heads = np.flatnonzero(head)
        w = word_of[pos]
        occ = np.add.reduceat(kind_count[w][order], heads) if len(heads) else heads
        if length > 1 and len(heads):
            at_end = pos + length == wend
            follow = np.where(at_end, np.where(kind_final[w], 0, 0xE2),
                              lead[np.minimum(q + 1, len(cp) - 1)])[order]
            branching = (np.minimum.reduceat(follow, heads)
                         != np.maximum.reduceat(follow, heads))
            total = np.where(branching, occ, 0)
            e = np.flatnonzero(at_end & kind_final[w])
            e_lo = np.full(len(heads), 1 << 20, np.int64)
            e_hi = np.full(len(heads), -1, np.int64)
            np.minimum.at(e_lo, sub[e], end_lo[w[e]])
            np.maximum.at(e_hi, sub[e], end_hi[w[e]])
            e_n = np.bincount(sub[e], weights=end_n[w[e]], minlength=len(heads))
            total = total + np.where(e_lo < e_hi, np.rint(e_n).astype(np.int64), 0)
            cand = np.flatnonzero(total >= 2)
            first = order[heads[cand]]  # one occurrence of each
            found.append((w[first], pos[first] - off[w[first]], np.full(len(cand), length),
                          total[cand]))
        keep = occ[sub] >= 2  # a substring seen once: so are its extensions
        pos, wend, sub = pos[keep], wend[keep], sub[keep]
        state, has_digit = state[keep], has_digit[keep]
    if found:
        w, b, ln, n = (np.concatenate(c) for c in zip(*found))
    else:
        w = b = ln = n = np.zeros(0, np.int64)
    # the candidates' strings: their code points as fixed-width UTF-32 (NumPy's `U` dtype;
    # a piece holds no NUL, the padding)
    width = int(ln.max(initial=1))
    at = (off[w] + b)[:, None] + np.arange(width)
    grid = np.where(np.arange(width) < ln[:, None], cp[np.minimum(at, len(cp) - 1)], 0)
    piece = pl.Series(grid.astype("<u4").view(f"<U{width}").ravel(), dtype=pl.String)
    score = (n.astype(F32) * ln.astype(F32)).astype(F32)
    return (pl.DataFrame({"piece": piece, "value": pl.Series(score, dtype=pl.Float32)})
            .with_columns(nbytes=pl.col("piece").str.len_bytes())
            .sort(["value", "nbytes", "piece"], descending=[True, True, False])
            .head(opts.seed_sentencepiece_size).select("piece", "value"))


# --- EM and pruning ----------------------------------------------------------------------------

@dataclass
class _Model:
    seed: np.ndarray  # per current piece: its seed index
    score: np.ndarray  # float32

    def ids(self, n_seeds: int) -> np.ndarray:
        out = np.full(n_seeds, -1, dtype=np.int64)
        out[self.seed] = np.arange(len(self.seed))
        return out


def e_step(model: _Model, n_seeds: int, base: LatticeBase, counts: np.ndarray,
           threads: int) -> np.ndarray:
    return base.expected(model.ids(n_seeds), model.score, counts, len(model.seed), threads)


def m_step(model: _Model, expected: np.ndarray) -> _Model:
    keep = expected >= F32(0.5)
    kept = expected[keep]
    total = np.cumsum(kept, dtype=F32)[-1] if len(kept) else F32(0)  # float32, in order
    logsum = F32(digamma(np.array([total]))[0])
    return _Model(model.seed[keep], (digamma(kept) - F64(logsum)).astype(F32))


def _top_two(score: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (`group`: ascending, contiguous ids 0..G-1 of which some may be absent), the
    positions in `score` of its best and second-best value, ties to the first: (best,
    second) per group present, in group order, -1 where a group has one value. Exact:
    comparisons of the float32 values, no sort."""
    if not len(score):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    heads = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[heads, len(score)])
    n = len(score)
    ar = np.arange(n)
    top = np.repeat(np.maximum.reduceat(score, heads), sizes)
    best = np.minimum.reduceat(np.where(score == top, ar, n), heads)
    rest = np.ones(n, bool)
    rest[best] = False
    masked = np.where(rest, score, -np.inf).astype(score.dtype)
    top2 = np.repeat(np.maximum.reduceat(masked, heads), sizes)
    second = np.minimum.reduceat(np.where(rest & (masked == top2), ar, n), heads)
    return best, np.where(sizes >= 2, second, -1)


def _candidates(part: tuple, i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(present, score, order key) of candidates `i` (-1: none) of a part of `two_best`'s
    candidates (scores, order keys, ...)."""
    values, keys = part[:2]
    if not len(values):
        return i >= 0, np.zeros(len(i), F32), np.zeros(len(i), np.int64)
    j = np.maximum(i, 0)
    return i >= 0, values[j], keys[j]


def _before(x: tuple, y: tuple) -> np.ndarray:
    """Candidates x come before y (`_candidates`): present, then higher score, then lower
    order key."""
    (px, sx, ox), (py, sy, oy) = x, y
    return px & (~py | (sx > sy) | ((sx == sy) & (ox < oy)))


def two_best(lat: Lattices) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Lattice::NBest(2) for every string: whether a second path exists, whether the best
    path is the whole string as one node, and the second path's piece ids (a list of columns:
    step k's ids, -1 past the path's end). A path's score is summed from its right end."""
    npos = lat.pos_off[-1]
    s1 = np.full(npos, -np.inf, dtype=F32)
    s2 = np.full(npos, -np.inf, dtype=F32)
    # (int32 nodes and int8 ranks: these arrays span every seed's positions)
    node_type = np.int32 if len(lat.score) < 2**31 else np.int64
    n1 = np.full(npos, -1, node_type)
    n2 = np.full(npos, -1, node_type)
    r1 = np.zeros(npos, np.int8)  # which path continues after the node (1 or 2)
    r2 = np.zeros(npos, np.int8)
    has2 = np.zeros(npos, dtype=bool)
    ends = lat.pos_off[1:] - 1
    s1[ends] = 0.0
    n1[ends] = -2  # EOS
    order = lat.begin_order()
    if isinstance(order, slice):  # already in begin order: no copies of the node columns
        start, end, b = lat.start, lat.end, lat.b
    else:
        start, end, b = lat.start[order], lat.end[order], lat.b[order]
    for pos in range(int(lat.nchar.max(initial=0)) - 1, -1, -1):
        ins = np.flatnonzero(b == pos)  # the nodes' ranks in begin order
        if not len(ins):
            continue
        idx = ins if isinstance(order, slice) else order[ins]
        st, en = start[ins], end[ins]
        # the candidates at each start position: every node followed by the best path from
        # its end (rank 1), and by the second best where there is one (rank 2); ranked by
        # score, ties by (node, rank) in begin order, as the A* pops them
        c1 = lat.score[idx] + s1[en]
        sec = np.flatnonzero(has2[en])
        c2 = lat.score[idx[sec]] + s2[en[sec]]
        # part A (rank 1) and part B (rank 2): scores, order keys (node, rank), nodes
        parts = ((c1, 2 * np.arange(len(ins)), idx, 1), (c2, 2 * sec + 1, idx[sec], 2))
        g = np.cumsum(np.r_[True, st[1:] != st[:-1]]) - 1  # each node's start position
        pos_of = st[np.r_[0, np.flatnonzero(st[1:] != st[:-1]) + 1]]
        # per position, the best and second-best candidate of each part (-1: none); every
        # position has a rank-1 candidate, not always a rank-2 one
        a1, a2 = _top_two(c1, g)
        b1, b2 = np.full(len(pos_of), -1, np.int64), np.full(len(pos_of), -1, np.int64)
        top, second = _top_two(c2, g[sec])
        b1[g[sec][top]], b2[g[sec][top]] = top, second

        ka1, ka2 = _candidates(parts[0], a1), _candidates(parts[0], a2)
        kb1, kb2 = _candidates(parts[1], b1), _candidates(parts[1], b2)
        a_first = _before(ka1, kb1)
        # the second: after A's best, the better of A's second and B's best; after B's
        # best, the better of A's best and B's second
        a2_next = a_first & _before(ka2, kb1)
        b1_next = a_first & ~a2_next & kb1[0]
        a1_next = ~a_first & _before(ka1, kb2)
        b2_next = ~a_first & ~a1_next & kb2[0]
        for sel, part, i in ((a_first, 0, a1), (~a_first, 1, b1)):
            values, _, nodes, r = parts[part]
            at = pos_of[sel]
            s1[at], n1[at], r1[at] = values[i[sel]], nodes[i[sel]], r
        for sel, part, i in ((a2_next, 0, a2), (b1_next, 1, b1), (a1_next, 0, a1),
                             (b2_next, 1, b2)):
            values, _, nodes, r = parts[part]
            at = pos_of[sel]
            s2[at], n2[at], r2[at] = values[i[sel]], nodes[i[sel]], r
            has2[at] = True
    heads = lat.pos_off[:-1]
    second_exists = has2[heads]
    best_whole = lat.length[np.maximum(n1[heads], 0)] == lat.nchar
    # follow the second path
    cols = []
    node = np.where(second_exists, n2[heads], -1)
    rank = np.where(second_exists, r2[heads], 0)
    alive = node >= 0
    while alive.any():
        cols.append(np.where(alive, lat.id[np.maximum(node, 0)], -1))
        nxt = lat.end[np.maximum(node, 0)]
        node = np.where(alive, np.where(rank == 1, n1[nxt], n2[nxt]), -1)
        rank = np.where(alive, np.where(rank == 1, r1[nxt], r2[nxt]), 0)
        alive = node >= 0
    return second_exists, best_whole, cols


def prune(model: _Model, n_seeds: int, base: LatticeBase, seed_base: LatticeBase,
          counts: np.ndarray, desired: int, opts: UnigramOptions) -> Pruning:
    """PruneSentencePieces (docs/unigram.md, 5.2): what happens to each piece, the kept ones'
    positions in the new order."""
    size = len(model.seed)
    ids = model.ids(n_seeds)
    # 1. each piece's own 2-best segmentation (the seeds' lattices, the pieces' kept)
    second, whole, alt_cols = two_best(seed_base.view(ids, model.score, strings=ids >= 0))
    second, whole = second[model.seed], whole[model.seed]
    always_keep = ~second | whole
    alts = np.stack([c[model.seed] for c in alt_cols], axis=1) if alt_cols \
        else np.full((size, 0), -1, np.int64)
    alts = np.where(second[:, None] & whole[:, None], alts, -1)
    n_alt = (alts >= 0).sum(axis=1)
    # 2. Viterbi counts over the words (float32, per thread, in SentencePiece's order)
    # (not beside the 2-best on the side thread: both at once raised the whole run's peak
    # on medium/en by 14-66 MiB, for a gain within the machine's noise)
    words, pieces, _, _ = base.viterbi(ids, model.score)
    freq = thread_sums(words, pieces, counts.astype(F32)[words], size, opts.num_threads)
    del words, pieces
    total = F32(np.cumsum(freq.astype(F64))[-1])  # std::accumulate with a double 0.0
    logsum = F32(np.log(F64(total)))
    # 3. the loss of each candidate
    gone = (freq == 0) | ~always_keep
    kept_plain = ~gone & (n_alt == 0)
    cand = np.flatnonzero(~gone & (n_alt > 0))
    f = freq[cand]
    logprob_sp = (np.log(f.astype(F64)) - F64(logsum)).astype(F32)
    logsum_alt = np.log((total + (f * (n_alt[cand] - 1).astype(F32))).astype(F64)).astype(F32)
    logprob_alt = np.zeros(len(cand), dtype=F32)
    for k in range(alts.shape[1]):
        a = alts[cand, k]
        m = a >= 0
        term = np.log((freq[a[m]] + f[m]).astype(F64)) - logsum_alt[m].astype(F64)
        logprob_alt[m] = (logprob_alt[m].astype(F64) + term).astype(F32)
    share = f / total
    loss = share * (logprob_sp - logprob_alt)
    pruned_size = max(desired, int(F32(F32(opts.shrinking_factor) * F32(size))))
    kept = np.flatnonzero(kept_plain)
    ranked = cand[np.lexsort((cand, -loss.astype(F64)))]
    room = pruned_size - len(kept)
    # SentencePiece stops when the count *equals* pruned_size: already above it, all stay
    take = ranked if room < 0 else ranked[:room]
    new = np.r_[kept, take].astype(np.int64)
    reason = np.full(size, KEPT, np.int64)
    reason[(freq == 0) & always_keep] = UNUSED
    reason[~always_keep] = NEVER_BEST
    reason[ranked[len(take):]] = LOSS
    loss_of = np.full(size, np.nan, dtype=F32)
    loss_of[cand] = loss
    return Pruning(freq, loss_of, reason, new, pruned_size)


def prune_unreachable(model: _Model, n_seeds: int, seed_base: LatticeBase) -> _Model:
    ids = model.ids(n_seeds)
    lat = seed_base.view(ids, model.score, strings=ids >= 0)
    nchar = seed_base.nchar
    self_node = ((lat.b == 0) & (lat.length == nchar[lat.w]) & ~lat.unk
                 & (lat.id == ids[lat.w]))
    has_self = np.zeros(n_seeds, dtype=bool)
    has_self[lat.w[self_node]] = True
    score = lat.score.copy()
    score[self_node] = -np.inf
    _, best = lat.viterbi(score)
    shadowed = best[model.seed] > model.score
    keep = has_self[model.seed] & ~shadowed
    return _Model(model.seed[keep], model.score[keep])


def finalize(model: _Model, seeds: pl.Series, required: pl.DataFrame,
             opts: UnigramOptions) -> tuple[list[str], np.ndarray]:
    pieces = seeds.gather(model.seed)
    table = pl.DataFrame({"piece": pieces, "score": model.score})
    req = required.with_columns(
        piece=pl.Series([chr(c) for c in required["cp"].to_list()], dtype=pl.String))
    req = req.join(table, on="piece", how="left", maintain_order="left")
    missing = req["score"].is_null().to_numpy()
    # min_score + penalty, the penalty growing by 0.0001 (float32) per missing character
    steps = np.full(int(missing.sum()), F32(0.0001), dtype=F32)
    penalty = np.r_[F32(0), np.cumsum(steps, dtype=F32)[:-1]].astype(F32) if len(steps) \
        else steps
    min_score = model.score.min() if len(model.score) else F32(0)
    filled = req["score"].to_numpy().astype(F32).copy()
    filled[missing] = (min_score + penalty).astype(F32)
    final = pl.DataFrame({"piece": req["piece"], "score": filled})
    room = opts.vocab_size - opts.meta_pieces - final.height
    rest = (table.join(final.select("piece"), on="piece", how="anti")
            .sort(["score", "piece"], descending=[True, False]).head(max(room, 0)))
    out = pl.concat([final, rest]).sort(["score", "piece"], descending=[True, False])
    return out["piece"].to_list(), out["score"].to_numpy().astype(F32)


def train_unigram(sentences: pl.Series, counts: np.ndarray | None, opts: UnigramOptions,
                  trace: UnigramTrace | None = None) -> UnigramResult:
    """Train on normalized sentences (`▁` for spaces, in SentencePiece's order, empty ones
    removed) with their counts (1 each when None). `trace`, when given, is filled with every EM
    iteration and pruning round (`unigram_log.UnigramTrace`: the SQL crosscheck replays them)."""
    sentences = pl.Series("sentence", sentences, dtype=pl.String)
    counts = np.ones(len(sentences), np.int64) if counts is None else np.asarray(counts)
    if len(sentences) == 0:
        raise UnigramError("no sentences to train on")
    required = required_characters(sentences, counts, opts)
    if required.height + opts.meta_pieces > opts.vocab_size:
        raise UnigramError(
            f"vocabulary size {opts.vocab_size} is smaller than the required characters "
            f"({required.height}) and meta pieces ({opts.meta_pieces}): raise the vocabulary "
            "size or lower the character coverage")
    sentences = replace_rare(sentences, required)
    tokens = word_tokens(sentences, counts)
    seeds_table = seed_pieces(sentences, counts, opts, tokens)
    if trace is not None:  # what the seeds came from (the SQL twin seeds from it again)
        trace.sentences, trace.sentence_counts = sentences, counts
    seeds = seeds_table["piece"]
    n_seeds = len(seeds)
    word_table = (tokens.group_by("word").agg(pl.col("count").sum())
                  .sort(["count", "word"], descending=[True, False]))
    # every word token is no longer needed (a row per word of the corpus: ~250 MiB on 27 MB
    # of English), nor the sentences with their rare characters replaced
    del tokens, sentences
    words = word_table["word"]
    wcounts = word_table["count"].to_numpy().astype(np.int64)
    del word_table
    desired = int(opts.vocab_size * 1.1)
    if trace is not None:
        trace.seeds, trace.words, trace.counts = seeds, words, wcounts
        trace.seed_table, trace.options = seeds_table, opts
        trace.desired, trace.shrinking_factor = desired, opts.shrinking_factor
    trie = SeedTrie.build(seeds)
    # each seed's lattice (for pruning) on the side thread beside the words' (NumPy releases
    # the GIL in the large steps; the trie is only read)
    seeds_built = side_thread().submit(LatticeBase.build, seeds, trie, folds="none")
    base = LatticeBase.build(words, trie)  # the words' lattices
    seed_base = seeds_built.result()
    del words, trie
    model = _Model(np.arange(n_seeds, dtype=np.int64), seeds_table["score"].to_numpy())
    del seeds_table
    release_free_heap()  # the build's temporaries
    base.release_begin(opts.num_threads)  # the sum chains built, the begin order let go
    release_free_heap()
    rounds: list[tuple[int, int, int, int]] = []
    drops = DropLog()
    while True:
        r, before = len(rounds), len(model.seed)
        for i in range(opts.num_sub_iterations):
            expected = e_step(model, n_seeds, base, wcounts, opts.num_threads)
            new = m_step(model, expected)
            drops.add(r, np.where(expected < F32(0.5), EM, KEPT), model.seed, model.score,
                      iteration=i, expected=expected)
            if trace is not None:
                trace.em.append(EMStep(r, i, model.seed, model.score, expected, new.seed,
                                       new.score))
            model = new
        after_em = len(model.seed)
        pruning = prune(model, n_seeds, base, seed_base, wcounts, desired, opts)
        drops.add(r, pruning.reason, model.seed, model.score, freq=pruning.freq,
                  loss=pruning.loss)
        if trace is not None:
            trace.prunes.append(PruneStep(r, model.seed, model.score, pruning))
        model = _Model(model.seed[pruning.kept], model.score[pruning.kept])
        release_free_heap()  # the pruning's temporaries
        rounds.append((r, before, after_em, len(model.seed)))
        if len(model.seed) <= desired:
            break
    reachable = prune_unreachable(model, n_seeds, seed_base)
    drops.add(len(rounds), np.where(np.isin(model.seed, reachable.seed), KEPT, UNREACHABLE),
              model.seed, model.score)
    model = reachable
    pieces, scores = finalize(model, seeds, required, opts)
    final = seeds.gather(model.seed).is_in(pl.Series(pieces, dtype=pl.String).implode()).to_numpy()
    drops.add(len(rounds), np.where(final, KEPT, FINAL_CUT), model.seed, model.score)
    possible = len(pieces) + opts.meta_pieces
    if opts.hard_vocab_limit and possible < opts.vocab_size:
        raise UnigramError(f"vocabulary size {opts.vocab_size} is too high for this corpus: "
                           f"training finds {possible} pieces (meta pieces included), give "
                           f"a vocabulary size of {possible} or less")
    return UnigramResult(pieces, scores, pl.DataFrame(
        rounds, schema=["round", "pieces", "after_em", "after_pruning"], orient="row"),
        drops.table(seeds))
