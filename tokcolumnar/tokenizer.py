"""The encoder/decoder: `Tokenizer` = normalizer + pre-tokenizer + model (+ decoder and
post-processor), loaded from a training directory or any HF `tokenizer.json`.

Batches are encoded columnar: texts are split around special tokens, normalised and
pre-tokenized by Polars expressions, the distinct words go through the model once, and the ids
are joined back to the rows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import TokcolumnarError
from .models import Model, lists_from_flat, model_from_hf
from .normalizers import Normalizer, normalizer_from_hf
from .pretokenizers import PreTokenizer, pretokenizer_from_hf


@dataclass
class Encoding:
    """One encoded text: token ids, token strings and the word index of each token (None for
    special tokens)."""

    ids: list[int]
    tokens: list[str]
    word_ids: list[int | None] = field(default_factory=list)
    type_ids: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class AddedToken:
    content: str
    id: int
    special: bool = True

    def to_hf(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": not self.special, "special": self.special}


class Tokenizer:
    """Encode and decode with a trained (or HF) tokenizer."""

    def __init__(self, model: Model, normalizer: Normalizer | None = None,
                 pre_tokenizer: PreTokenizer | None = None, decoder: Any = None,
                 post_processor: Any = None, added_tokens: list[AddedToken] | None = None):
        from .pretokenizers import WholeSequence

        self.model = model
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer or WholeSequence()
        self.decoder = decoder
        self.post_processor = post_processor
        self.added_tokens = added_tokens or []
        self._id_to_token = model.id_to_token()
        for t in self.added_tokens:
            while len(self._id_to_token) <= t.id:
                self._id_to_token.append("")
            self._id_to_token[t.id] = t.content
        self._token_series = pl.Series("tok", self._id_to_token, dtype=pl.String)
        contents = sorted((t.content for t in self.added_tokens), key=len, reverse=True)
        self._added_re = re.compile("|".join(re.escape(c) for c in contents)) if contents else None
        self._added_ids = {t.content: t.id for t in self.added_tokens}

    # -- loading -------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a `tokenizer.json` (ours or HF's)."""
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TokcolumnarError(f"tokenizer file not found: {path}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TokcolumnarError(f"cannot read {path} as tokenizer.json: {e}") from None
        return cls.from_hf_dict(d)

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], extras: dict[str, Any] | None = None) -> Tokenizer:
        model = model_from_hf(d["model"])
        if extras and extras.get("end_of_word_token") and hasattr(model, "end_of_word_token"):
            model.end_of_word_token = extras["end_of_word_token"]  # type: ignore[attr-defined]
        decoder = post = None
        try:
            from .decoders import decoder_from_hf

            decoder = decoder_from_hf(d.get("decoder"))
        except ImportError:  # pragma: no cover - decoders arrive with hf-compat
            decoder = None
        if d.get("post_processor") is not None:
            from .postprocessors import post_processor_from_hf

            post = post_processor_from_hf(d["post_processor"])
        added = [AddedToken(t["content"], t["id"], t.get("special", True))
                 for t in d.get("added_tokens") or []]
        pre = pretokenizer_from_hf(d.get("pre_tokenizer"))
        if extras and extras.get("pre_tokenizer") == "subword-nmt":
            from .subword_nmt import SubwordNmtSplit  # no exact HF equivalent

            pre = SubwordNmtSplit()
        return cls(model, normalizer_from_hf(d.get("normalizer")), pre, decoder, post, added)

    @classmethod
    def from_dir(cls, directory: str | Path) -> Tokenizer:
        """Load the tokenizer a `train` run wrote into `directory`."""
        directory = Path(directory)
        if not (directory / "tokenizer.json").exists():
            raise TokcolumnarError(f"{directory} has no tokenizer.json (not a training "
                                   "output directory?)")
        extras: dict[str, Any] = {}
        run = directory / "run.json"
        if run.exists():
            extras = json.loads(run.read_text(encoding="utf-8")).get("settings", {})
        d = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
        return cls.from_hf_dict(d, extras)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """A training directory (`from_dir`) or a tokenizer.json file (`from_file`)."""
        return cls.from_dir(path) if Path(path).is_dir() else cls.from_file(path)

    @classmethod
    def from_result(cls, result: Any) -> Tokenizer:
        from .exporters import tokenizer_json

        return cls.from_hf_dict(tokenizer_json(result), result.config.to_dict())

    def to_str(self) -> str:
        d = {"version": "1.0", "truncation": None, "padding": None,
             "added_tokens": [t.to_hf() for t in self.added_tokens],
             "normalizer": self.normalizer.to_hf() if self.normalizer else None,
             "pre_tokenizer": self.pre_tokenizer.to_hf(),
             "post_processor": self.post_processor.to_hf() if self.post_processor else None,
             "decoder": self.decoder.to_hf() if self.decoder else None,
             "model": self.model.to_hf()}
        return json.dumps(d, ensure_ascii=False)

    # -- encoding ------------------------------------------------------------------------------
    def get_vocab_size(self) -> int:
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        return self._added_ids.get(token, self.model.vocab.get(token))

    def id_to_token(self, i: int) -> str | None:
        return self._id_to_token[i] if 0 <= i < len(self._id_to_token) else None

    def _segments(self, texts: pl.Series) -> pl.DataFrame:
        """Rows split around added tokens: (row, seg, text, special id or null)."""
        df = texts.to_frame("text").with_row_index("row").with_columns(
            pl.lit(0, dtype=pl.UInt32).alias("seg"), pl.lit(None, dtype=pl.Int64).alias("sid"))
        if self._added_re is None:
            return df.select("row", "seg", "text", "sid")
        pattern = "|".join(re.escape(t.content) for t in self.added_tokens)
        has = df.get_column("text").str.contains(pattern)
        plain, special = df.filter(~has), df.filter(has)
        rows: list[tuple[int, int, str | None, int | None]] = []
        for row, text in zip(special.get_column("row").to_list(),
                             special.get_column("text").to_list()):
            seg, last = 0, 0
            for m in self._added_re.finditer(text):
                if m.start() > last:
                    rows.append((row, seg, text[last:m.start()], None))
                    seg += 1
                rows.append((row, seg, None, self._added_ids[m.group()]))
                seg += 1
                last = m.end()
            if last < len(text):
                rows.append((row, seg, text[last:], None))
        extra = pl.DataFrame(rows, schema={"row": pl.UInt32, "seg": pl.UInt32,
                                           "text": pl.String, "sid": pl.Int64}, orient="row")
        return pl.concat([plain.select("row", "seg", "text", "sid"), extra]).sort("row", "seg")

    def encode_ids(self, texts: Iterable[str] | pl.Series) -> pl.DataFrame:
        """Columnar encoding: one row per text with `ids` (list[u32]) and `word_ids`."""
        texts = texts if isinstance(texts, pl.Series) else pl.Series("text", list(texts),
                                                                      dtype=pl.String)
        n = len(texts)
        seg = self._segments(texts)
        text = pl.col("text")
        if self.normalizer is not None:
            text = self.normalizer.expr(text)
        words = (seg.lazy().filter(pl.col("sid").is_null())
                 .select("row", "seg", self.pre_tokenizer.expr(text).alias("word"))
                 .explode("word").drop_nulls("word")
                 .filter(pl.col("word").str.len_bytes() > 0)
                 .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("row", "seg")
                               .alias("k"))
                 .collect())
        uniq = words.get_column("word").unique(maintain_order=True)
        uniq_ids = self.model.encode_words(uniq)
        table = pl.DataFrame({"word": uniq, "ids": uniq_ids})
        pieces = words.join(table, on="word", how="left", maintain_order="left").select(
            "row", "seg", "k", "ids")
        # a special token written in the text counts as a word of its own, as in HF
        specials = seg.filter(pl.col("sid").is_not_null()).select(
            "row", "seg", pl.lit(0, dtype=pl.Int64).alias("k"),
            pl.concat_list(pl.col("sid").cast(pl.UInt32)).alias("ids"))
        allp = pl.concat([pieces, specials]).sort("row", "seg", "k").with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).over("row").alias("wi"))
        flat = allp.with_columns(pl.col("wi").repeat_by(pl.col("ids").list.len())
                                 .alias("wid")).explode("ids", "wid")
        flat = flat.drop_nulls("ids")
        row = flat.get_column("row").to_numpy().astype(np.int64)
        ids = lists_from_flat(n, row, flat.get_column("ids").cast(pl.UInt32).rename("ids"))
        wids = lists_from_flat(n, row, flat.get_column("wid").rename("word_ids"))
        out = pl.DataFrame({"ids": ids, "word_ids": wids})
        if self.post_processor is not None:
            out = self.post_processor.apply(out, self._added_ids)
        return out

    def _encodings(self, out: pl.DataFrame) -> list[Encoding]:
        tok = self._id_to_token
        ids_l = out.get_column("ids").to_list()
        wids_l = out.get_column("word_ids").to_list()
        types_l = (out.get_column("type_ids").to_list() if "type_ids" in out.columns
                   else [[0] * len(x) for x in ids_l])
        return [Encoding(ids, [tok[i] for i in ids], wids, types)
                for ids, wids, types in zip(ids_l, wids_l, types_l)]

    def encode_batch(self, texts: Iterable[str]) -> list[Encoding]:
        return self._encodings(self.encode_ids(texts))

    def encode_pair_ids(self, firsts: Iterable[str], seconds: Iterable[str]) -> pl.DataFrame:
        """Pairs of sequences (ids, word_ids, type_ids), joined by the post-processor."""
        from .postprocessors import encode_pair

        return encode_pair(self, list(firsts), list(seconds))

    def encode(self, text: str, pair: str | None = None) -> Encoding:
        """Encode one text, or a pair of texts (`[CLS] a [SEP] b [SEP]` with BERT)."""
        if pair is None:
            return self.encode_batch([text])[0]
        return self._encodings(self.encode_pair_ids([text], [pair]))[0]

    # -- decoding ------------------------------------------------------------------------------
    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        special = {t.id for t in self.added_tokens if t.special}
        tokens = [self._id_to_token[i] for i in ids
                  if not (skip_special_tokens and i in special)]
        if self.decoder is None:
            return " ".join(tokens)
        return self.decoder.decode(tokens)
