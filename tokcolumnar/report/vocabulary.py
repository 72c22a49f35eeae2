"""A vocabulary as a table of what its tokens stand for: surface text, Unicode script, length;
and the overlap of two vocabularies (Jaccard over surfaces, shared merge-list prefix)."""

from __future__ import annotations

import polars as pl

from ..models.bpe import BPEModel
from ..text.bytelevel import BYTES_TO_UNICODE
from ..text.decoders import ByteLevelDecoder
from ..text.pretokenizers import ByteLevel
from ..tokenizer import Tokenizer

# the script of a token is that of its first letter
SCRIPTS = ["Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Thai", "Hangul",
           "Hiragana", "Katakana", "Han"]
PARTIAL = "partial UTF-8"
HEX = [f"{b:02x}" for b in range(256)]
_C = "[89ab][0-9a-f]"  # a continuation byte 80..BF, as two hex digits
# well-formed UTF-8 (Unicode Table 3-7) over a hex string; partial characters do not match
# (Polars cannot cast invalid UTF-8 leniently, so only the rows that match are cast)
UTF8_HEX = (rf"^(?:[0-7][0-9a-f]|c[2-9a-f]{_C}|d[0-9a-f]{_C}|e0[ab][0-9a-f]{_C}"
            rf"|e[1-9a-c]{_C}{_C}|ed[89][0-9a-f]{_C}|e[ef]{_C}{_C}"
            rf"|f0(?:9[0-9a-f]|[ab][0-9a-f]){_C}{_C}|f[1-3]{_C}{_C}{_C}|f48[0-9a-f]{_C}{_C})*$")


def is_byte_level(tok: Tokenizer) -> bool:
    return isinstance(tok.pre_tokenizer, ByteLevel) or isinstance(tok.decoder, ByteLevelDecoder)


def vocab_frame(tok: Tokenizer) -> pl.DataFrame:
    """(id, token, hex, text, script, chars, bytes): `text` is what the token stands for
    (byte-level tokens mapped back to their bytes, `hex`; null when they are not whole UTF-8
    characters; `##` and the end-of-word suffix stripped)."""
    vocab = pl.DataFrame({"token": list(tok.model.vocab), "id": list(tok.model.vocab.values())},
                         schema={"token": pl.String, "id": pl.Int64})
    added = pl.DataFrame({"token": [t.content for t in tok.added_tokens],
                          "id": [t.id for t in tok.added_tokens]},
                         schema={"token": pl.String, "id": pl.Int64})
    vocab = pl.concat([vocab, added]).unique("id", keep="first").sort("id")
    added_ids = set(added.get_column("id").to_list())
    if is_byte_level(tok):
        chars = [BYTES_TO_UNICODE[b] for b in range(256)]
        hexed = pl.col("token").str.replace_many(chars, HEX)
        ok = hexed.str.contains(UTF8_HEX) & ~pl.col("id").is_in(list(added_ids))
        vocab = vocab.with_columns(hexed.alias("hex"), ok.alias("ok"))
        good = vocab.filter("ok").with_columns(
            pl.col("hex").str.decode("hex").cast(pl.String).alias("text"))
        other = vocab.filter(~pl.col("ok")).with_columns(
            pl.when(pl.col("id").is_in(list(added_ids))).then(pl.col("token"))
            .otherwise(pl.lit(None, dtype=pl.String)).alias("text"))
        vocab = pl.concat([good, other]).drop("ok").sort("id")
    else:
        vocab = vocab.with_columns(pl.col("token").alias("text"),
                                   pl.lit(None, dtype=pl.String).alias("hex"))
    t = pl.col("text")
    prefix = getattr(tok.model, "continuing_subword_prefix", None)
    suffix = getattr(tok.model, "end_of_word_suffix", None)
    if prefix:
        t = t.str.strip_prefix(prefix)
    if suffix:
        t = t.str.strip_suffix(suffix)
    return vocab.with_columns(t.alias("text")).with_columns(
        script_expr(pl.col("text")).alias("script"),
        pl.col("text").str.len_chars().alias("chars"),
        pl.col("text").str.len_bytes().alias("bytes"))


def script_expr(text: pl.Expr) -> pl.Expr:
    """The Unicode script of a token's first letter; "other letters", "digits/punct/space" or
    "partial UTF-8" (a byte-level token that is not whole characters) otherwise."""
    e = pl.when(text.is_null()).then(pl.lit(PARTIAL))
    for s in SCRIPTS:
        e = e.when(text.str.contains(rf"^\P{{L}}*\p{{{s}}}")).then(pl.lit(s))
    return e.when(text.str.contains(r"\p{L}")).then(pl.lit("other letters")).otherwise(
        pl.lit("digits/punct/space"))


def surface_expr() -> pl.Expr:
    """What a token of `vocab_frame` stands for, comparable across vocabularies: its text, or
    for a byte-level token that is not whole characters `<bytes HEX>` (its raw form could
    collide with another token's text)."""
    return pl.coalesce("text", pl.concat_str(pl.lit("<bytes "), pl.col("hex"), pl.lit(">")),
                       "token")


def surfaces(tok: Tokenizer) -> pl.Series:
    """The distinct surface strings of a vocabulary."""
    return vocab_frame(tok).select(surface_expr().alias("surface")).get_column(
        "surface").unique()


def jaccard(a: pl.Series, b: pl.Series) -> float:
    """|A ∩ B| / |A ∪ B| over distinct surface strings."""
    inter = a.to_frame("s").join(b.to_frame("s"), on="s", how="inner").height
    union = a.len() + b.len() - inter
    return inter / union if union else float("nan")


def merge_pairs(tok: Tokenizer) -> pl.DataFrame | None:
    """(rank, left, right) as surface strings, for BPE models; None otherwise."""
    if not isinstance(tok.model, BPEModel):
        return None
    v = vocab_frame(tok).select("token", surface_expr().alias("surface"))
    m = pl.DataFrame({"left": [a for a, _ in tok.model.merges],
                      "right": [b for _, b in tok.model.merges]},
                     schema={"left": pl.String, "right": pl.String}).with_row_index("rank")
    for side in ("left", "right"):
        m = m.join(v.rename({"token": side, "surface": f"{side}_s"}), on=side, how="left",
                   maintain_order="left")
    return m.select("rank", pl.coalesce("left_s", "left").alias("left"),
                    pl.coalesce("right_s", "right").alias("right"))


def shared_merge_prefix(a: pl.DataFrame | None, b: pl.DataFrame | None) -> int | None:
    """How many leading ranks merge the same pair (surface strings) in both merge lists."""
    if a is None or b is None:
        return None
    j = a.join(b, on="rank", how="inner", suffix="_b").sort("rank")
    diff = (j.get_column("left") != j.get_column("left_b")) | (
        j.get_column("right") != j.get_column("right_b"))
    return int(diff.arg_max()) if diff.any() else j.height
