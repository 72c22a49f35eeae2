"""The metrics people publish about a tokenizer on held-out text, columnar.

Every token count depends only on the pre-token it comes from, so a text file is read once
(streamed), reduced to its distinct pre-tokens with their counts, and those are encoded once;
every metric is then a Polars expression over (pre-token, count, ids). No Python loop runs over
tokens or lines.

Definitions (all ratios of totals over the file, as nanochat and tokka-bench compute them):
tokens are those the model produces for the text, without the post-processor's template tokens
(`[CLS]`/`[SEP]`, which depend on how a file is cut into rows); an added token written in the
text counts as one token; the text is read as training reads it (each line one sequence, its
line ending kept), and bytes/characters are those of exactly that text. Words
(`WORD_RE`) do not depend on the tokenizer, so fertility compares across tokenizers."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ..buffers import lists_from_flat
from ..corpus.readers import iter_sequences
from ..errors import warn
from ..layout import Layout
from ..models.bpe import BPEModel
from ..models.wordpiece import WordPieceModel
from ..text.pretokenizers import Whitespace, WhitespaceSplit
from ..text.words import WORD_RE
from ..tokenizer import Tokenizer

RENYI_ALPHA = 2.5  # Zouhar et al. 2023 recommend 2.5 (best correlation with BLEU)

# the metrics table's columns, in order (snake_case: the names of `compare --format json|csv`)
METRIC_COLUMNS = ["bytes", "chars", "words", "tokens", "bytes_per_token", "chars_per_token",
                  "fertility", "split_word_share", "pretoken_fertility", "unknown_rate",
                  "unknown_char_share", "vocab_utilization", "renyi_efficiency"]


@dataclass
class TextCounts:
    """One text file reduced to counts: totals, `WORD_RE` words (word, n), the tokenizer's
    pre-tokens (word, n) and the added tokens written in the text (id, n)."""

    name: str
    bytes: int
    chars: int
    words: pl.DataFrame
    pretokens: pl.DataFrame
    added: pl.DataFrame


def pretokenize(tok: Tokenizer, texts: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tokenizer's view of each text: (row, word) for the pre-tokens of the text between
    added tokens (normalised, then pre-tokenised), and (row, sid) for the added tokens written
    in the text, each one token of its own (as in Tokenizer.encode_ids)."""
    seg = tok._segments(texts)
    text = pl.col("text")
    if tok.normalizer is not None:
        text = tok.normalizer.expr(text)
    words = (seg.lazy().filter(pl.col("sid").is_null())
             .select("row", tok.pre_tokenizer.expr(text).alias("word"))
             .explode("word").drop_nulls("word")
             .filter(pl.col("word").str.len_bytes() > 0).collect())
    return words, seg.filter(pl.col("sid").is_not_null()).select("row", "sid")


def pretokens_within_runs(tok: Tokenizer) -> bool:
    """Whether pre-tokenizing a text is pre-tokenizing each of its runs of non-space
    characters on its own: no normaliser (it could change the spaces), a pre-tokenizer that
    splits at every space and whose pieces do not depend on what is around the run, and added
    tokens without spaces (a match cannot span two runs)."""
    return (tok.normalizer is None and isinstance(tok.pre_tokenizer, (Whitespace, WhitespaceSplit))
            and not any(re.search(r"\s", t.content) for t in tok.added_tokens))


def count_text(tok: Tokenizer, path: str | Path, fmt: str | None = None,
               column: str = "text") -> TextCounts:
    """One streamed pass over `path` (any input `encode` reads)."""
    n_bytes = n_chars = 0
    runs: list[pl.DataFrame] = []
    pre: list[pl.DataFrame] = []
    added: list[pl.DataFrame] = []
    by_runs = pretokens_within_runs(tok)
    for chunk in iter_sequences([str(path)], fmt=fmt, column=column,
                                pretokenizer=tok.pre_tokenizer):
        chunk = chunk.drop_nulls()
        n_bytes += int(chunk.str.len_bytes().sum())
        n_chars += int(chunk.str.len_chars().sum())
        # every WORD_RE word lies inside a run of non-space characters: count the runs here
        # and split only the distinct runs into words at the end
        runs.append(chunk.str.extract_all(r"\S+").explode().drop_nulls()
                    .value_counts(name="n").rename({chunk.name: "word"}))
        if by_runs:  # the pre-tokens come from the distinct runs, at the end
            continue
        words, specials = pretokenize(tok, chunk)
        pre.append(words.group_by("word").agg(pl.len().alias("n")))
        added.append(specials.group_by("sid").agg(pl.len().alias("n")))
    # one aggregation at the end: folding chunk by chunk would re-aggregate the growing table
    schema_w = {"word": pl.String, "n": pl.UInt64}

    def total(parts: list[pl.DataFrame], key: str, schema: dict) -> pl.DataFrame:
        parts = [p.cast(schema) for p in parts if p.height]
        if not parts:
            return pl.DataFrame(schema=schema)
        return pl.concat(parts).group_by(key).agg(pl.col("n").sum()).sort(key)

    run_counts = total(runs, "word", schema_w)
    if by_runs:
        # each distinct run pre-tokenised once, its pieces weighted by the run's count
        n = run_counts.get_column("n")
        words, specials = pretokenize(tok, run_counts.get_column("word"))
        pre = [words.select("word", pl.lit(n).gather(pl.col("row")).alias("n"))]
        added = [specials.select("sid", pl.lit(n).gather(pl.col("row")).alias("n"))]
    words = total([run_counts.with_columns(pl.col("word").str.extract_all(WORD_RE))
                   .explode("word").drop_nulls("word")], "word", schema_w)
    return TextCounts(Path(str(path)).name, n_bytes, n_chars, words,
                      total(pre, "word", schema_w),
                      total(added, "sid", {"sid": pl.Int64, "n": pl.UInt64}))


def word_token_counts(tok: Tokenizer, words: pl.Series, known: pl.DataFrame) -> pl.Series:
    """Tokens of each text of `words` encoded on its own (without template tokens), reusing
    `known` (word, len): the token counts of pre-tokens already encoded; only the others are
    encoded here."""
    pieces, specials = pretokenize(tok, words)
    distinct = pieces.select(pl.col("word").unique()).join(known, on="word", how="anti")
    fresh = pl.DataFrame({"word": distinct.get_column("word"),
                          "len": tok.model.encode_words(distinct.get_column("word"))
                          .list.len().cast(pl.Int64)})
    table = pl.concat([known.select("word", pl.col("len").cast(pl.Int64)), fresh])
    per_row = pl.concat([
        pieces.join(table, on="word", how="left").select("row", "len"),
        specials.select("row", pl.lit(1, dtype=pl.Int64).alias("len"))]).group_by("row").agg(
        pl.col("len").sum())
    out = pl.DataFrame({"row": np.arange(len(words), dtype=np.uint32)}).join(
        per_row.cast({"row": pl.UInt32}), on="row", how="left")
    return out.get_column("len").fill_null(0).alias("tokens")


def encode_bpe_traced(model: BPEModel, words: pl.Series,
                      initial: tuple[np.ndarray, np.ndarray] | None = None
                      ) -> tuple[pl.Series, np.ndarray, pl.DataFrame]:
    """BPE encoding of `words` (`BPEModel.apply_merges`: in every word the lowest-rank pair,
    leftmost on ties) that also records, per round, which word merged with
    which rank. `initial`: `model.initial_symbols(words)` when the caller has it. Returns (ids
    per word, initial symbol count per word, trace (w, step, rank))."""
    lengths, ids = initial if initial is not None else model.initial_symbols(words)
    layout = Layout.from_symbols(lengths, ids, np.ones(len(words), dtype=np.int64))
    rounds: list[tuple[np.ndarray, np.ndarray]] = []
    model.apply_merges(layout, trace=rounds)
    live = np.flatnonzero(layout.sym >= 0)
    out = lists_from_flat(len(words), layout.word_of[live],
                          pl.Series("ids", layout.sym[live].astype(np.uint32)))
    w = np.concatenate([x for x, _ in rounds]) if rounds else np.zeros(0, np.int64)
    r = np.concatenate([x for _, x in rounds]) if rounds else np.zeros(0, np.int64)
    trace = pl.DataFrame({"w": w, "step": np.arange(w.size, dtype=np.int64), "rank": r})
    return out, lengths, trace


def prefix_token_counts(lengths: np.ndarray, counts: np.ndarray, trace: pl.DataFrame,
                        n_merges: int) -> np.ndarray:
    """Tokens of the text under the first k merges, for every k = 0..n_merges, from one traced
    encoding. Encoding with merges[:k] is the full encoding stopped before its first step of
    rank >= k (both merge the lowest-ranked pair present; when that is >= k the restricted one
    has nothing left) -- exact when no pair is listed twice. Ranks applied to a word need not
    increase (a merged string that exists keeps its id), so a step counts under k merges when
    the running maximum of its word's ranks so far is < k."""
    n_init = int((lengths * counts).sum())
    saved = (trace.sort("step")  # rounds in order: the running max follows each word's steps
             .with_columns(pl.col("rank").cum_max().over("w").alias("pmax"))
             .with_columns(pl.lit(pl.Series(counts)).gather(pl.col("w")).alias("c"))
             .group_by("pmax").agg(pl.col("c").sum()))
    gain = np.zeros(n_merges + 1, dtype=np.int64)
    # a step whose running max is p is applied for every k > p
    np.add.at(gain, saved.get_column("pmax").to_numpy() + 1, saved.get_column("c").to_numpy())
    return n_init - np.cumsum(gain)


def duplicated_merges(model: BPEModel) -> int:
    """Pairs listed more than once in the merge list (the prefix curve is then defined as "the
    merges the full model uses with rank < k")."""
    return len(model.merges) - len(set(model.merges))


def unknown_chars(tok: Tokenizer, words: pl.Series, ids: pl.Series,
                  initial: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Characters of each pre-token the model could not represent: BPE maps them to the unknown
    token or, without one, drops them silently (HF does the same); WordPiece turns the whole
    word into the unknown token."""
    model = tok.model
    chars = words.str.len_chars().to_numpy().astype(np.int64)
    if isinstance(model, WordPieceModel):
        unk = model.vocab.get(model.unk_token)
        whole = ids.list.len().to_numpy() == 1
        if unk is None:
            return np.zeros(len(words), dtype=np.int64)
        is_unk = whole & (ids.list.first().fill_null(-1).to_numpy() == unk)
        return np.where(is_unk, chars, 0)
    if isinstance(model, BPEModel):
        lengths, flat = initial if initial is not None else model.initial_symbols(words)
        word_of = np.repeat(np.arange(len(words)), lengths)
        known = np.ones(flat.size, dtype=bool)
        if model.unk_token is not None and model.unk_token in model.vocab:
            known &= flat != model.vocab[model.unk_token]
        if model.end_of_word_token is not None and model.end_of_word_token in model.vocab:
            known &= flat != model.vocab[model.end_of_word_token]
        return chars - np.bincount(word_of[known], minlength=len(words))
    return np.zeros(len(words), dtype=np.int64)


def renyi_efficiency(counts: np.ndarray, vocab_size: int, alpha: float = RENYI_ALPHA) -> float:
    """Zouhar et al. 2023: H_alpha(p) / log|V| with H_alpha = log(sum p_i^alpha) / (1 - alpha);
    p over the token ids used, |V| the full vocabulary (the base of the log cancels)."""
    if counts.size == 0 or vocab_size < 2:
        return float("nan")
    # sorted, so that the floating-point sums do not depend on the order a group-by gave
    counts = np.sort(counts)
    p = counts / counts.sum()
    return float(np.log(np.sum(p ** alpha)) / (1.0 - alpha) / math.log(vocab_size))


WORDPIECE_GRID = 16  # points of the WordPiece curve (each one a re-encoding)


def wordpiece_prefix_tokens(model: WordPieceModel, words: pl.Series, counts: np.ndarray,
                            ranks: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """WordPiece has no prefix property (a missing piece changes the whole greedy walk), so the
    curve is exact at grid points only: the distinct pre-tokens re-encoded with the base
    vocabulary (specials, alphabet, variants: null rank) plus the tokens of the first k merges.
    `ranks`: the training directory's vocab table (token, id, rank). Returns (k, vocabulary
    size, tokens)."""
    rank = ranks.get_column("rank")
    n_merges = int(rank.max()) + 1 if rank.null_count() < len(rank) else 0
    grid = np.unique(np.r_[0, np.geomspace(1, max(n_merges, 1), WORDPIECE_GRID - 1).round(),
                           n_merges].astype(np.int64))
    sizes, tokens = [], []
    for k in grid:
        keep = ranks.filter(pl.col("rank").is_null() | (pl.col("rank") < k))
        sub = WordPieceModel(vocab=dict(zip(keep.get_column("token").to_list(),
                                            keep.get_column("id").cast(pl.Int64).to_list())),
                             unk_token=model.unk_token,
                             continuing_subword_prefix=model.continuing_subword_prefix,
                             max_input_chars_per_word=model.max_input_chars_per_word)
        lengths = sub.encode_words(words).list.len().to_numpy().astype(np.int64)
        sizes.append(keep.height)
        tokens.append(int((lengths * counts).sum()))
    return grid, np.array(sizes, dtype=np.int64), np.array(tokens, dtype=np.int64)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def text_metrics(tok: Tokenizer, tc: TextCounts, *, curve: bool = True,
                 ranks: pl.DataFrame | None = None
                 ) -> tuple[dict[str, object], pl.DataFrame | None]:
    """The metrics row of one text, and bytes per token by vocabulary size: (k, vocab_size,
    tokens, bytes_per_token, file) for every prefix of the merge list (BPE), or at grid points
    (WordPiece, given the training directory's vocab table `ranks`)."""
    pre = tc.pretokens
    words = pre.get_column("word")
    counts = pre.get_column("n").to_numpy().astype(np.int64)
    model = tok.model
    prefix = None
    initial = None
    if isinstance(model, BPEModel):
        # the traced encoding costs what the plain one does; its initial symbols also give
        # the characters the model cannot represent
        initial = model.initial_symbols(words)
        ids, lengths, trace = encode_bpe_traced(model, words, initial)
        if curve:
            prefix = prefix_token_counts(lengths, counts, trace, len(model.merges))
    else:
        ids = model.encode_words(words)
    n_added = int(tc.added.get_column("n").sum())
    enc = pl.DataFrame({"ids": ids, "n": pre.get_column("n")})
    tokens = int((enc.get_column("ids").list.len().cast(pl.Int64) * enc.get_column("n")).sum())
    tokens += n_added
    # how often each id is used, weighted by the pre-token counts; added tokens included
    id_counts = (enc.explode("ids").drop_nulls().group_by("ids").agg(pl.col("n").sum())
                 .rename({"ids": "id"}).cast({"id": pl.Int64, "n": pl.UInt64}))
    id_counts = pl.concat([id_counts, tc.added.rename({"sid": "id"})]).group_by("id").agg(
        pl.col("n").sum())
    vocab_size = tok.get_vocab_size()
    unk = tok.unknown_id()
    n_unk = int(id_counts.filter(pl.col("id") == unk).get_column("n").sum()) if unk is not None \
        else 0
    unk_chars = int((unknown_chars(tok, words, ids, initial) * counts).sum())
    pre_chars = int((words.str.len_chars().to_numpy().astype(np.int64) * counts).sum())
    # split share: each distinct word encoded as a text by itself (tokka-bench's
    # continued_word_rate), over every word rather than a sample
    wd = tc.words
    n_words = int(wd.get_column("n").sum())
    known = pl.DataFrame({"word": words, "len": ids.list.len()})
    split = int(wd.get_column("n").filter(
        word_token_counts(tok, wd.get_column("word"), known) > 1).sum()) if wd.height else 0
    row: dict[str, object] = {
        "file": tc.name, "bytes": tc.bytes, "chars": tc.chars, "words": n_words,
        "tokens": tokens,
        "bytes_per_token": _ratio(tc.bytes, tokens), "chars_per_token": _ratio(tc.chars, tokens),
        "fertility": _ratio(tokens, n_words), "split_word_share": _ratio(split, n_words),
        "pretoken_fertility": _ratio(tokens, int(counts.sum()) + n_added),
        "unknown_rate": _ratio(n_unk, tokens), "unknown_char_share": _ratio(unk_chars, pre_chars),
        "vocab_utilization": id_counts.height / vocab_size,
        "renyi_efficiency": renyi_efficiency(
            id_counts.get_column("n").to_numpy().astype(np.float64), vocab_size),
    }
    table = None
    if curve and isinstance(model, WordPieceModel) and ranks is not None:
        ks, sizes, wp_tokens = wordpiece_prefix_tokens(model, words, counts, ranks)
        # added tokens outside the model's vocabulary count in every prefix
        extra = tok.get_vocab_size() - ranks.height
        table = pl.DataFrame({"k": ks, "vocab_size": sizes + extra,
                              "tokens": wp_tokens + n_added})
    if prefix is not None:
        assert isinstance(model, BPEModel)
        # vocabulary size under the first k merges: the base tokens plus the distinct new ids
        # among merges[:k] (a merged string that already exists keeps its id)
        new_ids = _merge_new_ids(model)
        first = np.zeros(len(new_ids), dtype=np.int64)
        if len(new_ids):
            _, idx = np.unique(new_ids, return_index=True)
            first[idx] = 1
        base = vocab_size - int(first.sum())
        sizes = base + np.concatenate([[0], np.cumsum(first)])
        all_tokens = prefix + n_added
        table = pl.DataFrame({"k": np.arange(len(prefix)), "vocab_size": sizes,
                              "tokens": all_tokens})
    if table is not None:
        table = table.with_columns(
            (pl.lit(float(tc.bytes)) / pl.col("tokens")).alias("bytes_per_token"),
            pl.lit(tc.name).alias("file"))
    return row, table


def _merge_new_ids(model: BPEModel) -> np.ndarray:
    """The id each merge produces, in rank order."""
    v, p = model.vocab, model.continuing_subword_prefix
    return np.array([v[a + (b[len(p):] if p else b)] for a, b in model.merges], dtype=np.int64)


def unknown_message(file: str, share: float, label: str = "") -> str:
    """The warning for a file with characters the model could not represent."""
    return (f"{label}{file}: {share:.2%} of the characters could not be represented (dropped "
            "or mapped to the unknown token); bytes_per_token, chars_per_token and parity "
            "count them as covered")


def metrics_table(tok: Tokenizer, paths: list[str], fmt: str | None = None,
                  column: str = "text", curve: bool = True, ranks: pl.DataFrame | None = None,
                  label: str = "") -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One metrics row per text file, and the prefix curves of all files (BPE; WordPiece when
    `ranks` is given). A file with characters the model cannot represent gets a
    `TokcolumnarWarning` (`label` names the tokenizer in it)."""
    rows, curves = [], []
    for path in paths:
        row, table = text_metrics(tok, count_text(tok, path, fmt, column), curve=curve,
                                  ranks=ranks)
        share = row["unknown_char_share"]
        if isinstance(share, float) and share > 0:
            warn(unknown_message(str(row["file"]), share, label))
        rows.append(row)
        if table is not None:
            curves.append(table)
    schema = {"file": pl.String, **{c: (pl.Int64 if c in ("bytes", "chars", "words", "tokens")
                                        else pl.Float64) for c in METRIC_COLUMNS}}
    return (pl.DataFrame(rows, schema=schema, orient="row"),
            pl.concat(curves) if curves else None)
