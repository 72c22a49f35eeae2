"""Dictionary word segmenters for text written without spaces, as pre-tokenizers:
`--pre-tokenizer jieba` (Chinese, rjieba = jieba-rs, extra `tokcolumnar[zh]`) and
`--pre-tokenizer mecab` (Japanese, MeCab through fugashi with the unidic-lite dictionary, extra
`tokcolumnar[ja]`). This is the only module that imports those libraries, and only when a
segmenter is built.

Words are the segmenter's pieces with whitespace-only pieces dropped and each piece split at
whitespace (`\\S+`, Rust's Unicode `\\s`): exactly HF `WhitespaceSplit` run on the text
pre-segmented by the reference library and joined with spaces. `tokenizer.json` records
`WhitespaceSplit` (the closest pre-tokenizer HF can load, right for pre-segmented text);
`run.json` keeps the segmenter, which `Tokenizer.from_dir` restores.

Columnar: a text is cut into *chunks* that the segmenter provably handles independently, the
distinct chunks are segmented once, and their words are joined back (encoding) or their counts
multiplied (training), so the segmenter's cost grows with the distinct chunks, not the corpus.

* jieba cuts its input into maximal runs of its block class (CJK ideographs, ASCII letters and
  digits, `+#&._%-`) and emits every other character alone; each run is segmented on its own.
  So a chunk is such a run, or one other non-space character (already a word). The distinct
  runs are joined with "\\n" (outside the class, so a cut) and segmented in a few calls.
* MeCab's choice depends on the context across spaces and punctuation, so nothing inside a line
  is an exact cut: a chunk is a whole line (cut at "\\n", the "\\r" of "\\r\\n" and a NUL,
  which MeCab would read as the end of the text, left out). A line over 64 KiB is refused:
  past about 190 KiB of ASCII MeCab's path cost overflows and fugashi crashes the process.

`--cjk-split words` (default) keeps the words the segmenter guesses for text its dictionary
does not know (jieba's HMM; MeCab's unknown-word groups); `chars` cuts those into characters
(jieba with the HMM off; MeCab's unknown kanji / kana nodes split into characters), while ASCII
letters and digits stay together in both."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from typing import Any, ClassVar

import polars as pl

from ..errors import TokcolumnarError, TokcolumnarValueError
from .pretokenizers import AFTER_WHITESPACE_OR_CJK, PreTokenizer

SEGMENTER_NAMES = ("jieba", "mecab")
CJK_SPLITS = ("words", "chars")

# jieba-rs's block class (0.9's RE_HAN_DEFAULT, 0.10+'s `is_han_default`; rjieba 0.2.2 bundles
# jieba-rs 0.11.0). rjieba is pinned below 0.3 and the every-line test catches a change.
JIEBA_HAN = (r"\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2A6DF}"
             r"\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{2CEB0}-\x{2EBEF}"
             r"\x{2F800}-\x{2FA1F}")
_JIEBA_CLASS = JIEBA_HAN + r"a-zA-Z0-9+#&._%\-"
JIEBA_BLOCK = f"[{_JIEBA_CLASS}]"
# a block, or any other single non-space character (jieba emits those alone)
JIEBA_CHUNK = f"{JIEBA_BLOCK}+|[^{_JIEBA_CLASS}\\s]"
# text joined for one rjieba call (distinct blocks, "\n" between them)
JIEBA_BATCH_CHARS = 1 << 20

MECAB_MAX_LINE_BYTES = 64 * 1024
# MeCab character types (unidic-lite's char.def) of unknown nodes that `chars` splits:
# KANJI, HIRAGANA, KATAKANA, KANJINUMERIC (ALPHA, NUMERIC, SYMBOL... stay whole)
MECAB_SPLIT_TYPES = ("2", "6", "7", "8")
MECAB_UNKNOWN = "1"  # MeCab's node stat of an unknown word
# one line per node: stat, char type, surface (tab and newline are MeCab spaces: never inside
# a surface), between "[" and "]": fugashi's parse() strips Python whitespace from its output,
# which would take a \x1c..\x1f or \x85 surface at either end with it
_MECAB_NODES = r' -O "" -B "[" -F "%s\t%t\t%m\n" -U "%s\t%t\t%m\n" -E "]"'

_EXTRAS = {"jieba": ("rjieba", "zh"), "mecab": ("fugashi and unidic-lite", "ja")}


def _missing(name: str) -> TokcolumnarError:
    what, extra = _EXTRAS[name]
    return TokcolumnarError(f"--pre-tokenizer {name} needs {what}: "
                            f"pip install 'tokcolumnar[{extra}]'")


def _words(segments: pl.Expr) -> pl.Expr:
    """Each segment's `\\S+` pieces (whitespace-only segments give none)."""
    return segments.str.extract_all(r"\S+")


@dataclass
class Segmenter(PreTokenizer):
    """A dictionary segmenter. `split_expr` cuts texts into chunks (pure Polars);
    `segment_distinct` segments distinct chunks; `segment_table` turns a counted chunk table into
    the counted words; `expr` does all of it for a column (encoding)."""

    hf_type: ClassVar[str] = ""  # not an HF type: serialised as WhitespaceSplit
    name: ClassVar[str] = ""
    packages: ClassVar[tuple[str, ...]] = ()
    cjk_split: str = "words"

    def __post_init__(self) -> None:
        if self.cjk_split not in CJK_SPLITS:
            raise TokcolumnarValueError(f"unknown cjk-split {self.cjk_split!r} (choose from "
                                        f"{', '.join(CJK_SPLITS)})")
        self._load()

    def _load(self) -> None:
        raise NotImplementedError

    def segment_distinct(self, chunks: pl.Series) -> pl.DataFrame:
        """(idx, k, word): the words of each chunk (idx = its position in `chunks`, which
        holds no duplicates), k-th word of the chunk."""
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        # the closest HF-loadable pre-tokenizer: right for text already segmented by spaces
        return {"type": "WhitespaceSplit"}

    def versions(self) -> dict[str, str]:
        """The segmenter libraries' versions (for `run.json`)."""
        return {p: metadata.version(p) for p in self.packages}

    def segment_table(self, chunks: pl.DataFrame) -> pl.DataFrame:
        """(word=chunk, count[, first_seen]) -> (word, count[, first_seen]) of the words: each
        distinct chunk is segmented once and its words take its count. `first_seen` orders the
        words as the word stream does: by the chunk's first position, then the word's place in
        the chunk (chunks do not overlap)."""
        seg = self.segment_distinct(chunks.get_column("word"))
        rest = [c for c in chunks.columns if c != "word"]
        joined = seg.join(chunks.select(rest).with_row_index("idx"), on="idx")
        if "first_seen" in rest:
            joined = (joined.sort("first_seen", "k")
                      .with_columns(pl.int_range(pl.len(), dtype=pl.UInt64).alias("first_seen")))
            return joined.group_by("word").agg(pl.col("count").sum(),
                                               pl.col("first_seen").min())
        return joined.group_by("word").agg(pl.col("count").sum())

    def _segment_series(self, texts: pl.Series) -> pl.Series:
        """Each text's words, in order (a null text gives null)."""
        pieces = (texts.to_frame("t").with_row_index("row")
                  .with_columns(self.split_expr(pl.col("t")).alias("chunk"))
                  .select("row", "chunk").explode("chunk").drop_nulls("chunk")
                  .with_row_index("pos"))
        distinct = pieces.get_column("chunk").unique(maintain_order=True)
        seg = self.segment_distinct(distinct)
        words = (pieces.join(distinct.to_frame("chunk").with_row_index("idx"), on="chunk")
                 .join(seg, on="idx").sort("pos", "k")
                 .group_by("row", maintain_order=True).agg(pl.col("word")))
        out = (texts.to_frame("t").with_row_index("row")
               .join(words, on="row", how="left", maintain_order="left"))
        lists = out.select(pl.when(pl.col("t").is_null()).then(None)
                           .otherwise(pl.col("word").fill_null([]))).to_series()
        return lists.cast(pl.List(pl.String)).rename(texts.name)

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.map_batches(self._segment_series, return_dtype=pl.List(pl.String))

    def encode_split_expr(self, col: pl.Expr) -> pl.Expr:
        # the encoder's pieces are the segmenter's words, not its chunks
        return self.expr(col)


@dataclass
class JiebaSplit(Segmenter):
    """jieba's accurate mode (rjieba, the reference): `words` = HMM on, `chars` = HMM off."""

    name: ClassVar[str] = "jieba"
    packages: ClassVar[tuple[str, ...]] = ("rjieba",)
    line_sensitive: ClassVar[bool] = False

    def _load(self) -> None:
        try:
            import rjieba
        except ImportError:
            raise _missing(self.name) from None
        self._cut = rjieba.cut

    def line_cut(self) -> str | None:
        # whitespace and the CJK punctuation of this rule are outside jieba's block class
        return AFTER_WHITESPACE_OR_CJK

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(JIEBA_CHUNK)

    def segment_distinct(self, chunks: pl.Series) -> pl.DataFrame:
        is_block = chunks.str.contains(f"^{JIEBA_BLOCK}")
        idx = pl.int_range(len(chunks), dtype=pl.UInt32, eager=True)
        # a single character outside the block class is one word already
        n_singles = len(chunks) - int(is_block.sum())
        singles = pl.DataFrame({"idx": idx.filter(~is_block),
                                "k": pl.repeat(0, n_singles, dtype=pl.UInt32, eager=True),
                                "word": chunks.filter(~is_block)})
        blocks = chunks.filter(is_block)
        block_idx = idx.filter(is_block)
        # one rjieba call per ~1 MiB of blocks joined by "\n" (a cut of its own): a call per
        # block would cost more in Python <-> Rust round trips than the segmentation
        batch = ((blocks.str.len_chars() + 1).cum_sum() - 1) // JIEBA_BATCH_CHARS
        hmm = self.cjk_split == "words"
        parts = [singles]
        start = 0
        for size in batch.unique_counts().to_list():
            end = start + size
            toks = pl.Series("word", self._cut("\n".join(blocks.slice(start, size).to_list()),
                                               hmm), dtype=pl.String).to_frame()
            # b = which block of the batch a token belongs to (the number of "\n" before it)
            part = (toks.with_columns((pl.col("word") == "\n").cum_sum().cast(pl.UInt32)
                                      .alias("b"))
                    .filter(pl.col("word") != "\n")
                    .with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).over("b").alias("k")))
            owner = block_idx.slice(start, end - start).gather(part.get_column("b"))
            parts.append(part.select(owner.alias("idx"), "k", "word"))
            start = end
        return pl.concat(parts)


@dataclass
class MecabSplit(Segmenter):
    """MeCab with unidic-lite (fugashi's GenericTagger with explicit -r and -d: fugashi.Tagger()
    would take the full `unidic` package when installed, and MeCab reads $MECABRC)."""

    name: ClassVar[str] = "mecab"
    packages: ClassVar[tuple[str, ...]] = ("fugashi", "unidic-lite")
    line_sensitive: ClassVar[bool] = True

    def _load(self) -> None:
        try:
            import fugashi
            import unidic_lite
        except ImportError:
            raise _missing(self.name) from None
        dic = unidic_lite.DICDIR
        args = f'-r "{os.path.join(dic, "mecabrc")}" -d "{dic}"'
        self._parse = fugashi.GenericTagger(args + _MECAB_NODES).parse

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        # lines without their "\r\n" / "\n" (a NUL ends a piece too: MeCab stops reading there)
        return col.str.split("\n").list.eval(
            pl.element().str.strip_suffix("\r").str.split("\x00").explode()
            .filter(pl.element().str.len_bytes() > 0))

    def segment_distinct(self, chunks: pl.Series) -> pl.DataFrame:
        longest = chunks.str.len_bytes().max()
        if longest is not None and longest > MECAB_MAX_LINE_BYTES:
            raise TokcolumnarError(
                f"a line of {longest:,} bytes is longer than MeCab can segment safely "
                f"({MECAB_MAX_LINE_BYTES // 1024} KiB; MeCab fails on long lines): break it "
                "into lines or sentences")
        # MeCab segments one line per call (lines are independent, it cannot batch them)
        out = pl.Series("out", [self._parse(s) for s in chunks.to_list()], dtype=pl.String)
        # the nodes of each line: drop the "[" "]" sentinels, one row per node
        nodes = (out.str.slice(1, out.str.len_chars() - 2).to_frame().with_row_index("idx")
                 .select("idx", pl.col("out").str.split("\n").alias("node"))
                 .explode("node").drop_nulls("node")
                 .filter(pl.col("node").str.len_bytes() > 0)
                 .select("idx", pl.col("node").str.splitn("\t", 3).alias("f")).unnest("f"))
        stat, kind, surface = (pl.col(c) for c in nodes.columns[1:])
        # each surface's \S+ pieces (HF WhitespaceSplit of the surfaces joined by spaces);
        # with `chars`, an unknown kanji / kana node (never whitespace) as its characters
        split = (pl.lit(self.cjk_split == "chars") & (stat == MECAB_UNKNOWN)
                 & kind.is_in(MECAB_SPLIT_TYPES))
        words = (nodes.select("idx", pl.when(split).then(surface.str.split(""))
                              .otherwise(_words(surface)).alias("word"))
                 .explode("word").drop_nulls("word")
                 .filter(pl.col("word").str.len_bytes() > 0))
        return (words.with_columns(pl.col("idx").cast(pl.UInt32),
                                   pl.int_range(pl.len(), dtype=pl.UInt32).over("idx").alias("k"))
                .select("idx", "k", "word"))


def build_segmenter(name: str, cjk_split: str | None = None) -> Segmenter:
    """The segmenter for `--pre-tokenizer jieba|mecab` and `--cjk-split` (default words)."""
    table: dict[str, type[Segmenter]] = {"jieba": JiebaSplit, "mecab": MecabSplit}
    if name not in table:
        raise TokcolumnarValueError(f"unknown segmenter {name!r} (choose from "
                                    f"{', '.join(SEGMENTER_NAMES)})")
    return table[name](cjk_split or "words")
