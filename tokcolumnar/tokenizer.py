"""The encoder/decoder: `Tokenizer` = normalizer + pre-tokenizer + model (+ decoder and
post-processor), loaded from a training directory or any HF `tokenizer.json`.

Batches are encoded columnar: texts are split around special tokens, normalised and
pre-tokenized by Polars expressions, the distinct words go through the model once, and the ids
are joined back to the rows."""

from __future__ import annotations

import json
import numbers
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa

from .buffers import (
    gather_runs,
    list_parts,
    lists_from_flat,
    lists_from_offsets,
    repeat_runs,
    run_index,
)
from .encode.alignment import ChainAligner
from .encode.charsplit import CharSplit
from .encode.offsets import (
    CharTable,
    NormAlignment,
    TokenTable,
    exclusive_cumsum,
    kept_chars,
    normalizer_table,
    offsets_supported,
    offsets_view,
    piece_starts,
    trim_offsets,
    unigram_word_spans,
    word_spans,
)
from .encode.offsets import check_supported as check_offsets_supported
from .encode.truncation import Truncation, take_windows, windows
from .errors import TokcolumnarError, TokcolumnarTypeError, TokcolumnarValueError
from .hfjson import HFObject, check_depth, too_deep
from .llama2_export import sentencepiece_bpe_parts
from .models import BPEModel, Model, model_from_hf
from .models.base import U32_MAX
from .models.cache import WordCache, distinct_words
from .models.sentencepiece_model import BPE as SENTENCEPIECE_BPE
from .models.sentencepiece_model import SentencePieceModel
from .models.unigram import UnigramModel
from .models.whole_words import split_option, whole_words_first
from .progress import StageTimer
from .text.bytelevel import byte_map_bytes, byte_map_expr
from .text.decoders import ByteLevelDecoder, DecodeTable, decode_rows, decoder_from_hf
from .text.normalizers import Normalizer, normalizer_from_hf
from .text.patterns import named_pattern, pattern_name_or_regex
from .text.postprocessors import ByteLevelProcessing, offset_trimming, post_processor_from_hf
from .text.pretokenizers import (
    ByteLevel,
    PatternByteLevel,
    PreTokenizer,
    SubwordNmtSplit,
    WholeSequence,
    pretokenizer_from_hf,
)
from .text.segmenters import SEGMENTER_NAMES, build_segmenter
from .tiktoken_format import merges_of_ranks, parse_special_tokens, read_tiktoken, to_tiktoken
from .unigram_export import UnigramParts, sentencepiece_parts

ENCODE_BATCH_ROWS = 100_000  # rows per batch of encode_column (bounds its working memory)


@dataclass
class Encoding:
    """One encoded text, as HF's `Encoding`: token ids, token strings, the word index of each
    token (None for special tokens), type ids, each token's (start, end) character span in the
    text (`offsets`; (0, 0) for the special tokens the post-processor adds; empty when the
    tokenizer's normalizer or pre-tokenizer has no offsets, see `encode.offsets`) and, with
    truncation, the `overflowing` windows."""

    ids: list[int]
    tokens: list[str]
    word_ids: list[int | None] = field(default_factory=list)
    type_ids: list[int] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)
    overflowing: list[Encoding] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def attention_mask(self) -> list[int]:
        return [1] * len(self.ids)


@dataclass
class AddedToken:
    content: str
    id: int
    special: bool = True

    def to_hf(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": not self.special, "special": self.special}


def added_tokens_from_hf(items: list[Any], vocab: dict[str, int]) -> list[AddedToken]:
    """The `added_tokens` of a `tokenizer.json`, checked against the ids HF gives them.

    HF ignores the ids written in the file: an added token that is in the model's vocabulary
    takes its id there, any other one the next id (the vocabulary's size, or one past the
    greatest added id once that is beyond it), in file order; a token with empty content is
    skipped and a repeated one keeps its first id. A file whose ids differ from those would
    encode differently in HF and here, so it is refused, naming the token."""
    out: list[AddedToken] = []
    ids: dict[str, int] = {}
    for k, raw in enumerate(items):
        t = HFObject(raw, f"added_tokens[{k}]")
        tid = t.int("id", maximum=U32_MAX)
        content = t.str("content")
        special = t.bool("special", True)
        for name in ("single_word", "lstrip", "rstrip", "normalized"):
            t.bool(name, False)
        if not content:
            continue
        if content in ids:
            expected, why = ids[content], "the id of its first entry"
        elif content in vocab:
            expected, why = vocab[content], "its id in the model's vocabulary"
        else:
            top = max(ids.values(), default=None)
            expected = len(vocab) if top is None or (top < len(vocab) and vocab) else top + 1
            why = "added tokens outside the vocabulary take the next ids, in order"
        if tid != expected:
            raise t.error(f"{content!r} has id {tid}, but HF gives it id {expected} ({why})")
        if content not in ids:
            ids[content] = tid
            out.append(AddedToken(content, tid, special))
    return out


class Tokenizer:
    """Encode and decode with a trained (or HF) tokenizer."""

    def __init__(self, model: Model, normalizer: Normalizer | None = None,
                 pre_tokenizer: PreTokenizer | None = None, decoder: Any = None,
                 post_processor: Any = None, added_tokens: list[AddedToken] | None = None):
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
        # which ids exist (a vocabulary may have gaps, as HF allows)
        self._known_id = np.zeros(len(self._id_to_token), dtype=bool)
        self._known_id[np.fromiter(model.vocab.values(), dtype=np.int64,
                                   count=len(model.vocab))] = True
        self._known_id[[t.id for t in self.added_tokens]] = True
        self._token_series = pl.Series("tok", self._id_to_token, dtype=pl.String)
        contents = sorted((t.content for t in self.added_tokens), key=len, reverse=True)
        self._added_re = re.compile("|".join(re.escape(c) for c in contents)) if contents else None
        self._added_ids = {t.content: t.id for t in self.added_tokens}
        self._cache: WordCache | None = None
        #: HF's BPE `ignore_merges`: a word that is a token is that token (whole_words.py)
        self.ignore_merges = False
        #: the file a caller loaded this tokenizer from (`from_tiktoken`), which an encode
        #: output must not replace
        self.source_file: str | None = None
        # the code-point split of a BERT pipeline (None inside: the pipeline has none), with
        # the ids of the components it was made for
        self._char_split: tuple[tuple[int, ...], CharSplit | None] | None = None
        self._tokens_table: TokenTable | None = None
        # (the decoder it was built for, its DecodeTable or None when it is not positional)
        self._decode_table: tuple[Any, DecodeTable | None] | None = None
        self._space_counts: tuple[np.ndarray, np.ndarray] | None = None
        self._offset_chars: tuple[CharTable | ChainAligner | None, CharTable] | None = None
        self._lock = threading.Lock()
        self.truncation_params: Truncation | None = None

    # -- loading -------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a `tokenizer.json` (ours or HF's). A file that is not valid JSON, or whose
        content is not a valid tokenizer, raises `TokcolumnarValueError` naming the file."""
        return cls._load(Path(path))

    @classmethod
    def _load(cls, path: Path, extras: dict[str, Any] | None = None) -> Tokenizer:
        d = read_json(path, "tokenizer.json")
        try:
            return cls.from_hf_dict(d, extras)
        except TokcolumnarError as e:
            raise type(e)(f"{path}: {e}") from None

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], extras: dict[str, Any] | None = None) -> Tokenizer:
        """Build from a parsed `tokenizer.json`. Each component checks its own fields
        (`from_hf`); here, what involves several: the added tokens' ids against the vocabulary,
        and a BPE model with no merges although its vocabulary has tokens only merges make.
        `extras`: a training run's settings (end-of-word token, subword-nmt splitting, the
        jieba / MeCab segmenter)."""
        check_depth(d)
        root = HFObject(d, "top level")
        # HF's ignore_merges, applied around the word cache (models/whole_words.py)
        model_json, ignore_merges = split_option(root.obj("model"))
        model = model_from_hf(model_json)
        extras = extras or {}
        if extras.get("end_of_word_token") and hasattr(model, "end_of_word_token"):
            model.end_of_word_token = extras["end_of_word_token"]  # type: ignore[attr-defined]
        decoder = decoder_from_hf(root.obj("decoder", None, nullable=True))
        post = post_processor_from_hf(root.obj("post_processor", None, nullable=True))
        added = added_tokens_from_hf(root.list("added_tokens", []), model.vocab)
        pre = pretokenizer_from_hf(root.obj("pre_tokenizer", None, nullable=True))
        if extras.get("pre_tokenizer") == "subword-nmt":  # no exact HF equivalent
            pre = SubwordNmtSplit()
        elif extras.get("pre_tokenizer") in SEGMENTER_NAMES:  # tokenizer.json: WhitespaceSplit
            pre = build_segmenter(extras["pre_tokenizer"], extras.get("cjk_split"))
        normalizer = normalizer_from_hf(root.obj("normalizer", None, nullable=True))
        if isinstance(model, BPEModel) and not model.merges:
            made_otherwise = {t.content for t in added} | {model.unk_token,
                                                           model.end_of_word_token}
            lost = [t for t in model.tokens_needing_merges() if t not in made_otherwise]
            if lost:
                raise TokcolumnarValueError(
                    f"model BPE: no merges, but {len(lost):,} vocabulary tokens (e.g. "
                    f"{lost[0]!r}) can only be made by merges: the merges are missing")
        tokenizer = cls(model, normalizer, pre, decoder, post, added)
        tokenizer.ignore_merges = ignore_merges
        return tokenizer

    @classmethod
    def from_dir(cls, directory: str | Path) -> Tokenizer:
        """Load the tokenizer a `train` run wrote into `directory` (its `tokenizer.json`, and
        from `run.json`, when present, the settings HF's format cannot hold)."""
        directory = Path(directory)
        if not directory.is_dir():
            raise TokcolumnarError(f"tokenizer directory not found: {directory}")
        # a run whose settings HF's format cannot express writes OWN_TOKENIZER_FILE instead
        found = [directory / n for n in ("tokenizer.json", OWN_TOKENIZER_FILE)
                 if (directory / n).is_file()]
        if not found:
            raise TokcolumnarError(f"{directory} has no tokenizer.json (not a training "
                                   "output directory?)")
        return cls._load(found[0], run_settings(directory / "run.json"))

    @classmethod
    def from_unigram(cls, parts: UnigramParts) -> Tokenizer:
        """A Unigram tokenizer from its parts (`unigram_export`): its special tokens first."""
        added = [AddedToken(m, i, special=True) for i, m in enumerate(parts.special)]
        return cls(parts.model, parts.normalizer, parts.pre_tokenizer, parts.decoder, None,
                   added)

    @classmethod
    def from_sentencepiece(cls, source: str | Path | bytes) -> Tokenizer:
        """A SentencePiece Unigram or BPE `.model` (a path or its bytes; spm_train's or ours)
        as a tokenizer that encodes as `SentencePieceProcessor` (`unigram_export.
        sentencepiece_parts`, `llama2_export.sentencepiece_bpe_parts`)."""
        if isinstance(source, bytes):
            return cls._from_sentencepiece_bytes(source)
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise TokcolumnarError(f"cannot read {path}: {e.strerror or e}") from None
        try:
            return cls._from_sentencepiece_bytes(data)
        except TokcolumnarError as e:
            raise type(e)(f"{path}: {e}") from None

    @classmethod
    def _from_sentencepiece_bytes(cls, data: bytes) -> Tokenizer:
        model = SentencePieceModel.from_bytes(data)
        if model.model_type != SENTENCEPIECE_BPE:
            return cls.from_unigram(sentencepiece_parts(data))
        parts = sentencepiece_bpe_parts(model)
        added = [AddedToken(t, i, special=True) for t, i in parts.special]
        return cls(parts.model, parts.normalizer, parts.pre_tokenizer, parts.decoder, None,
                   added)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """A training directory (`from_dir`), a SentencePiece `.model` file
        (`from_sentencepiece`) or a tokenizer.json file (`from_file`)."""
        if Path(path).is_dir():
            return cls.from_dir(path)
        if Path(path).suffix == ".model":
            return cls.from_sentencepiece(path)
        return cls.from_file(path)

    def to_dict(self) -> dict[str, Any]:
        """The `tokenizer.json` object (HF's format; the one serialisation of a tokenizer)."""
        return {"version": "1.0", "truncation": None, "padding": None,
                "added_tokens": [t.to_hf() for t in self.added_tokens],
                "normalizer": self.normalizer.to_hf() if self.normalizer else None,
                "pre_tokenizer": self.pre_tokenizer.to_hf(),
                "post_processor": self.post_processor.to_hf() if self.post_processor else None,
                "decoder": self.decoder.to_hf() if self.decoder else None,
                "model": {**self.model.to_hf(),
                          **({"ignore_merges": True} if self.ignore_merges else {})}}

    def to_str(self) -> str:
        """`tokenizer.json` as text."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def to_tiktoken(self, name: str = "tokcolumnar") -> Any:
        """This byte-level BPE as a `tiktoken.Encoding` (its ranks, split pattern and special
        tokens; needs the optional `tiktoken` package): see `tiktoken_format`."""
        return to_tiktoken(self, name)

    @classmethod
    def from_tiktoken(cls, path: str | Path, pattern: str,
                      special_tokens: list[str] | dict[str, int] | None = None) -> Tokenizer:
        """The tokenizer of a `tokenizer.tiktoken` file (tiktoken's `base64 rank` lines) with
        its split pattern (a named pattern or its regex, `text/patterns.py`) and special
        tokens (`NAME=ID` items or names numbered after the last rank, or a dict): a
        byte-level BPE whose ids are the ranks. Every split of a token into two tokens is a
        merge, by the token's rank: tiktoken's order (`tiktoken_format.merges_of_ranks`)."""
        name, _ = pattern_name_or_regex(pattern)
        if name is None:
            raise TokcolumnarValueError(f"--pattern {pattern!r}: only the named patterns (gpt2, "
                                        "cl100k, o200k, qwen2, llama3, gpt4, gpt4o) are "
                                        "supported with a .tiktoken vocabulary")
        ranks = read_tiktoken(str(path))
        special = (dict(special_tokens) if isinstance(special_tokens, dict)
                   else parse_special_tokens(list(special_tokens or []), ranks))
        vocab = {byte_map_bytes(b): r for b, r in ranks.items()}
        merges = [(byte_map_bytes(a), byte_map_bytes(b)) for a, b in merges_of_ranks(ranks)]
        vocab.update(special)
        pre: PreTokenizer = (ByteLevel(add_prefix_space=False) if name == "gpt2" else
                             PatternByteLevel(use_regex=False, pattern=named_pattern(name)))
        decoder = ByteLevelDecoder(add_prefix_space=True, trim_offsets=True, use_regex=True)
        tokenizer = cls(BPEModel(vocab, merges), None, pre, decoder, None,
                        [AddedToken(t, i) for t, i in special.items()])
        tokenizer.source_file = str(path)  # an output must not replace it (encode.dataset)
        return tokenizer

    # -- encoding ------------------------------------------------------------------------------
    def get_vocab_size(self) -> int:
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        return self._added_ids.get(token, self.model.vocab.get(token))

    def unknown_id(self) -> int | None:
        """The id of the model's unknown token (None: the model has none, e.g. byte-level BPE)."""
        name = getattr(self.model, "unk_token", None)
        return self.token_to_id(name) if name else None

    def added_token_ids(self) -> dict[str, int]:
        """Added token content -> id."""
        return self._added_ids

    def tokens_of(self, ids: pl.Series) -> pl.Series:
        """The token strings of a list[u32] Series of ids (list[str], columnar)."""
        import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

        offsets, values = list_parts(ids)
        tokens = self._token_series.gather(values.astype(np.int64))
        arr = pa.LargeListArray.from_arrays(pa.array(offsets), tokens.to_arrow())
        return pl.Series("tokens", arr).cast(pl.List(pl.String))

    def id_to_token(self, i: int) -> str | None:
        return self._id_to_token[i] if 0 <= i < len(self._id_to_token) else None

    def _segments(self, texts: pl.Series) -> pl.DataFrame:
        """Rows split around added tokens: (row, seg, text, special id or null, start: the
        segment's first character in the row)."""
        df = texts.to_frame("text").with_row_index("row").with_columns(
            pl.lit(0, dtype=pl.UInt32).alias("seg"), pl.lit(None, dtype=pl.Int64).alias("sid"),
            pl.lit(0, dtype=pl.Int64).alias("start"))
        if self._added_re is None:
            return df.select("row", "seg", "text", "sid", "start")
        # literal search (Aho-Corasick), and most batches hold no added token: then as above
        has = df.get_column("text").str.contains_any([t.content for t in self.added_tokens])
        if not has.any():
            return df.select("row", "seg", "text", "sid", "start")
        plain, special = df.filter(~has), df.filter(has)
        rows: list[tuple[int, int, str | None, int | None, int]] = []
        for row, text in zip(special.get_column("row").to_list(),
                             special.get_column("text").to_list()):
            seg, last = 0, 0
            for m in self._added_re.finditer(text):
                if m.start() > last:
                    rows.append((row, seg, text[last:m.start()], None, last))
                    seg += 1
                rows.append((row, seg, None, self._added_ids[m.group()], m.start()))
                seg += 1
                last = m.end()
            if last < len(text):
                rows.append((row, seg, text[last:], None, last))
        extra = pl.DataFrame(rows, schema={"row": pl.UInt32, "seg": pl.UInt32,
                                           "text": pl.String, "sid": pl.Int64,
                                           "start": pl.Int64}, orient="row")
        return pl.concat([plain.select("row", "seg", "text", "sid", "start"),
                          extra]).sort("row", "seg")

    def encode_ids(self, texts: Iterable[str] | pl.Series) -> pl.DataFrame:
        """Columnar encoding: one row per text with `ids` (list[u32]) and `word_ids`. `texts`:
        strings, or a Polars string Series (a null row encodes to no ids)."""
        return self.encode_frame(text_series(texts), overflowing=False)

    # -- truncation (HF's enable_truncation) ----------------------------------------------------
    def enable_truncation(self, max_length: int, stride: int = 0,
                          strategy: str = "longest_first", direction: str = "right") -> None:
        """Truncate every encoding to `max_length` tokens, special tokens included (room is
        kept for them), as HF's `enable_truncation`: `encode`/`encode_batch` then give the
        rest as `overflowing` windows of the same size overlapping by `stride` tokens;
        `direction` "left" keeps the end of the text. The columnar methods (`encode_ids`,
        `encode_column`, `encode_arrow`) keep the first window (`encode_arrow` can give them
        all, see `return_overflowing`). Pairs of texts are not truncated (refused)."""
        if strategy not in ("longest_first", "only_first"):
            raise TokcolumnarValueError(f"truncation: strategy {strategy!r} is not supported "
                                        "(single sequences: longest_first or only_first)")
        params = Truncation(max_length, stride, direction)
        params.room(self.num_special_tokens_to_add())
        self.truncation_params = params

    def no_truncation(self) -> None:
        self.truncation_params = None

    @property
    def truncation(self) -> dict[str, Any] | None:
        """The truncation parameters as HF shows them (None when off)."""
        return None if self.truncation_params is None else self.truncation_params.to_hf()

    def num_special_tokens_to_add(self, is_pair: bool = False) -> int:
        return 0 if self.post_processor is None else self.post_processor.added_tokens(is_pair)

    def encode_frame(self, texts: pl.Series, add_special_tokens: bool = True,
                     offsets: bool = False, overflowing: bool = True,
                     timer: StageTimer | None = None) -> pl.DataFrame:
        """The columnar encoding every method shares: one row per encoding with `ids`,
        `word_ids`, `type_ids`, with `offsets` also `starts` and `ends` (list[u32] each), and
        `overflow_to_sample_mapping`, the index of its text. With truncation, a text gives one
        row per window when `overflowing` (the first one first, as HF's encoding then its
        `overflowing`), else only the first. `add_special_tokens=False` leaves out the
        post-processor's tokens (HF's `add_special_tokens=False`)."""
        timer = timer or StageTimer()
        raw = self.encode_raw(texts, timer, offsets=offsets)
        rows = np.arange(len(texts), dtype=np.int64)
        with timer.stage("post-process"):
            if self.truncation_params is not None:
                # HF truncates the model's tokens, keeping room for the special tokens
                params = self.truncation_params
                room = params.room(self.num_special_tokens_to_add()
                                   if add_special_tokens else 0)
                lengths = raw.get_column("ids").list.len().to_numpy()
                rows, start, stop = windows(lengths, room, params.stride, params.direction,
                                            overflowing)
                raw = take_windows(raw, rows, start, stop)
            trim = offset_trimming(self.post_processor)
            if offsets and trim is not None:
                raw = self._trimmed(raw, trim)
            if add_special_tokens and self.post_processor is not None:
                out = self.post_processor.apply(raw, self._added_ids)
            else:
                out = raw.with_columns(type_ids=pl.col("ids").list.eval(pl.element() * 0))
            out = out.with_columns(pl.col("ids").cast(pl.List(pl.UInt32)),
                                   pl.col("type_ids").cast(pl.List(pl.UInt32)))
            return out.with_columns(overflow_to_sample_mapping=pl.Series(rows, dtype=pl.UInt32))

    def _trimmed(self, raw: pl.DataFrame, add_prefix_space: bool) -> pl.DataFrame:
        """HF's ByteLevel offset trimming on every encoding (window) of `raw`."""
        if self._space_counts is None:
            def spaces(t: str) -> int:
                return len(t) - len(t.lstrip("Ġ" + "".join(
                    c for c in set(t) if c.isspace() and c not in "\x1c\x1d\x1e\x1f")))
            lead = np.array([spaces(t) for t in self._id_to_token], dtype=np.int64)
            trail = np.array([spaces(t[::-1]) for t in self._id_to_token], dtype=np.int64)
            self._space_counts = (lead, trail)
        ids_off, ids = list_parts(raw.get_column("ids"))
        _, starts = list_parts(raw.get_column("starts"))
        _, ends = list_parts(raw.get_column("ends"))
        row = np.repeat(np.arange(len(ids_off) - 1, dtype=np.int64), np.diff(ids_off))
        pos = np.arange(len(ids), dtype=np.int64) - ids_off[row]
        new_start, new_end = trim_offsets(ids.astype(np.int64), pos, starts.astype(np.int64),
                                          ends.astype(np.int64), *self._space_counts,
                                          add_prefix_space)
        n = raw.height
        return raw.with_columns(
            starts=lists_from_flat(n, row, pl.Series("starts", new_start, dtype=pl.UInt32)),
            ends=lists_from_flat(n, row, pl.Series("ends", new_end, dtype=pl.UInt32)))

    def __getstate__(self) -> dict[str, Any]:
        # the word cache (and its lock) stays behind: a copy sent to a worker makes its own
        state = self.__dict__.copy()
        state["_cache"] = None
        state["_char_split"] = None
        state["_offset_chars"] = None
        state["_decode_table"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def word_cache(self) -> WordCache:
        """The word -> ids cache of this tokenizer (kept across batches; made on first use)."""
        if self._cache is None:
            pre, model = self.pre_tokenizer, self.model
            if (type(pre) in (ByteLevel, PatternByteLevel) and isinstance(model, BPEModel)
                    and model.byte_ids() is not None):
                # a byte-level BPE's initial symbols are the words' UTF-8 bytes: read from
                # the text itself, without mapping each byte to its character first
                encode = model.encode_byte_words_kept
                if self.ignore_merges:  # the word's token: its bytes as characters
                    encode = whole_words_first(model.vocab, byte_map_expr, encode)
                self._cache = WordCache(model, pre.text_word_expr, encode_kept=encode)
            elif self.ignore_merges and isinstance(model, BPEModel):
                def encode_all(words: pl.Series) -> tuple[pl.Series, np.ndarray]:
                    return model.encode_words(words), np.ones(len(words), dtype=bool)

                self._cache = WordCache(model, pre.word_expr, encode_kept=whole_words_first(
                    model.vocab, lambda w: w, encode_all))
            else:
                self._cache = WordCache(model, pre.word_expr)
        return self._cache

    def char_split(self) -> CharSplit | None:
        """The code-point split of a BERT pipeline (`encode.charsplit`), None for others (made
        once, on first use)."""
        parts = (self.normalizer, self.pre_tokenizer, self.model)
        with self._lock:
            # made again when a component was replaced since
            if self._char_split is None or self._char_split[0] != tuple(map(id, parts)):
                self._char_split = (tuple(map(id, parts)), CharSplit.build(*parts))
        return self._char_split[1]

    def encode_raw(self, texts: pl.Series, timer: StageTimer | None = None,
                   offsets: bool = False) -> pl.DataFrame:
        """`ids` and `word_ids` before post-processing (with `offsets`, also each token's
        character span in its text as `starts` and `ends`, see `encode.offsets`).

        Every text is split into items in order: the pre-tokens of its text segments and the
        added tokens found between them (each counts as a word, as in HF). The distinct
        pre-tokens go through the word cache once; the items' ids are gathered with NumPy
        through the offsets of that table (see `models.cache`). `timer` gets the time of each
        stage (normalize, pre-tokenize, dedupe, model, gather)."""
        timer = timer or StageTimer()
        n = len(texts)
        if offsets:
            check_offsets_supported(self.normalizer, self.pre_tokenizer)
            if isinstance(self.model, UnigramModel):  # the spans of unknown runs, kept
                self.model.keep_spans()
        chars = None if offsets else self.char_split()
        if chars is not None and chars.worth_it(texts):
            return self._encode_chars(chars, texts, timer)
        with timer.stage("normalize"):
            seg = self._segments(texts)
            if seg.n_chunks() > 1:
                # one chunk: Polars compiles a regex for every chunk it runs on (the GPT-2
                # pattern ~5 ms, and its lazy DFA starts cold: ~11 ms more per extra chunk of
                # a 30k-line zh batch), and a batch joined from the reader's pieces has several
                seg = seg.rechunk()
            original = seg.get_column("text")
            if self.normalizer is not None:
                seg = seg.with_columns(self.normalizer.expr(pl.col("text")))
        with timer.stage("pre-tokenize"):
            # the pre-tokens of every segment (none for an added token's segment): by the
            # pre-tokenizer's kernel where it has one (not for offsets, which read the pieces
            # of the expression), else by its expression
            found = None if offsets else self.pre_tokenizer.encode_split_flat(
                seg.get_column("text"))
            if found is not None:
                per_seg, flat = found  # no piece is empty
                seg_of_word = run_index(per_seg)
            else:
                split = seg.select(self.pre_tokenizer.encode_split_expr(pl.col("text"))
                                   ).to_series()
                per_seg = split.list.len().fill_null(0).to_numpy().astype(np.int64)
                flat = split.explode().drop_nulls()
                nonempty = (flat.str.len_bytes() > 0).to_numpy()
                seg_of_word = run_index(per_seg)
                if not nonempty.all():  # an empty pre-token is not a word (as in HF)
                    flat = flat.filter(pl.Series(nonempty))
                    seg_of_word = seg_of_word[nonempty]
                    per_seg = np.bincount(seg_of_word, minlength=len(per_seg)).astype(np.int64)
        with timer.stage("dedupe"):
            # the batch's distinct words, and each word's index among them
            uniq, uniq_hash, index = distinct_words(flat)
        with timer.stage("model"):
            # distinct pre-tokens once through the cache (the model sees only new words)
            table_offsets, values = self.word_cache().lookup(uniq, uniq_hash)
        with timer.stage("gather"):
            out, token_item, item_word, item_seg = self._gather(
                n, seg, per_seg, seg_of_word, index, table_offsets, values)
        if not offsets:
            return out
        with timer.stage("offsets"):
            return out.with_columns(**self._offsets(
                n, seg, original, flat, seg_of_word, per_seg, uniq, index, table_offsets,
                values, token_item, item_word, item_seg))

    def _encode_chars(self, chars: CharSplit, texts: pl.Series, timer: StageTimer
                      ) -> pl.DataFrame:
        """`encode_raw` (without offsets) through the code-point split of a BERT pipeline:
        the one-character words (CJK ideographs, punctuation) take their ids from a table,
        only the longer words go through the word cache (see `encode.charsplit`)."""
        with timer.stage("normalize"):
            seg = self._segments(texts)
        items = chars.split_raw(seg.get_column("text"), timer)
        if items is None:  # a character needs the whole text normalized first
            with timer.stage("normalize"):
                normalized = chars.normalized(seg.get_column("text"))
            with timer.stage("pre-tokenize"):
                items = chars.split(normalized)
        with timer.stage("dedupe"):
            uniq, uniq_hash, word_index = distinct_words(items.words)
        with timer.stage("model"):
            table_offsets, values = self.word_cache().lookup(uniq, uniq_hash)
        with timer.stage("gather"):
            table_offsets, values, index = chars.table(items, table_offsets, values,
                                                       word_index)
            return self._gather(len(texts), seg, items.per_seg, items.item_seg, index,
                                table_offsets, values)[0]

    def _offsets(self, n: int, seg: pl.DataFrame, original: pl.Series, flat: pl.Series,
                 seg_of_word: np.ndarray, per_seg: np.ndarray, uniq: pl.Series,
                 index: np.ndarray, table_offsets: np.ndarray, values: np.ndarray,
                 token_item: np.ndarray, item_word: np.ndarray, item_seg: np.ndarray
                 ) -> dict[str, pl.Series]:
        """Each token's (start, end) in its row's original text (see `encode.offsets`)."""
        normalizer, pre = offsets_view(self.normalizer, self.pre_tokenizer)
        normalized = seg.get_column("text")
        # 1. normalized position -> original character, per segment (without the character
        # a `Prepend` put before the text: `offsets_view` counts it as the pre-tokenizer's)
        tables = self._char_tables()
        unprefixed = normalized
        if pre is not self.pre_tokenizer:
            unprefixed = normalized.to_frame("t").select(
                pl.when(pl.col("t").str.len_bytes() > 0).then(pl.col("t").str.slice(1))
                .otherwise(pl.col("t"))).to_series()
        align = NormAlignment.build(normalizer, tables[0], original, unprefixed)
        # 2. each word's start in its segment's normalized text
        word_start = piece_starts(pre, tables[1], normalized, flat, seg_of_word, per_seg)
        # 3. each token's span in its word, per distinct word
        texts = uniq.to_frame("w").select(pre.piece_text_expr(pl.col("w"))).to_series()
        if isinstance(self.model, UnigramModel):
            span_start, span_end = unigram_word_spans(self.model, texts, table_offsets, values)
        else:
            span_start, span_end = word_spans(self._token_table(), texts, table_offsets,
                                              values)
        # every token: its word's start + its span in the word, mapped to original characters
        # (an added token spans its content)
        lengths = np.diff(table_offsets)[index]
        run_start = np.repeat(table_offsets[:-1][index] - exclusive_cumsum(lengths)[:-1],
                              lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
        tok_word = item_word[token_item]
        is_word = tok_word >= 0
        seg_of_tok = item_seg[token_item]
        seg_start = seg.get_column("start").to_numpy().astype(np.int64)[seg_of_tok]
        starts = np.empty(len(token_item), dtype=np.int64)
        ends = np.empty(len(token_item), dtype=np.int64)
        # the tokens of words, in item order: the runs of their words' entries
        where = np.flatnonzero(is_word)
        a = word_start[tok_word[where]] + span_start[run_start]
        b = word_start[tok_word[where]] + span_end[run_start]
        s_of = seg_of_tok[where]
        # (-1: HF's empty span (0, 0) of a character inserted before the text)
        first = np.maximum(align.original(s_of, np.maximum(a, 0)), 0)
        last = align.original(s_of, np.maximum(b - 1, 0)) + 1
        starts[where] = seg_start[where] + first
        ends[where] = seg_start[where] + np.where(b > a, last, first)
        sp = np.flatnonzero(~is_word)
        if len(sp):
            sid = seg.get_column("sid").to_numpy()[seg_of_tok[sp]]
            content_len = np.array([len(self._id_to_token[int(i)]) for i in sid],
                                   dtype=np.int64)
            starts[sp] = seg_start[sp]
            ends[sp] = seg_start[sp] + content_len
        token_row = seg.get_column("row").to_numpy().astype(np.int64)[seg_of_tok]
        return {"starts": lists_from_flat(n, token_row, pl.Series("starts", starts,
                                                                  dtype=pl.UInt32)),
                "ends": lists_from_flat(n, token_row, pl.Series("ends", ends, dtype=pl.UInt32))}

    def _char_tables(self) -> tuple[CharTable | ChainAligner | None, CharTable]:
        """Per code point, kept across batches: the normalized length, whether the
        pre-tokenizer keeps the character."""
        with self._lock:
            if self._offset_chars is None:
                normalizer, pre = offsets_view(self.normalizer, self.pre_tokenizer)
                self._offset_chars = (None if normalizer is None
                                      else normalizer_table(normalizer), kept_chars(pre))
        return self._offset_chars

    def _token_table(self) -> TokenTable:
        if self._tokens_table is None:
            self._tokens_table = TokenTable.build(self.model, self._id_to_token,
                                                  self.pre_tokenizer.maps_bytes())
        return self._tokens_table

    @staticmethod
    def _gather(n: int, seg: pl.DataFrame, per_seg: np.ndarray, seg_of_word: np.ndarray,
                index: np.ndarray, offsets: np.ndarray, values: np.ndarray
                ) -> tuple[pl.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
        """The rows' `ids` and `word_ids` from each word's index in the table of distinct
        words (runs `values[offsets[i]:offsets[i+1]]`) and the added tokens of `seg`, with
        NumPy gathers; also each token's item, and each item's word (-1: an added token) and
        segment."""
        n_table = len(offsets) - 1
        sid = seg.get_column("sid")
        is_special = sid.is_not_null().to_numpy()
        if is_special.any():
            # an added token is one item: appended to the table as a run of one id
            special_ids = sid.filter(pl.Series(is_special)).to_numpy().astype(np.uint32)
            values = np.concatenate([values, special_ids])
            offsets = np.concatenate([offsets, offsets[-1] + 1 + np.arange(
                len(special_ids), dtype=np.int64)])
            items_per_seg = per_seg + is_special
            item_start = np.zeros(len(per_seg) + 1, dtype=np.int64)
            np.cumsum(items_per_seg, out=item_start[1:])
            item_table = np.empty(int(item_start[-1]), dtype=np.int64)
            word_start = np.zeros(len(per_seg) + 1, dtype=np.int64)
            np.cumsum(per_seg, out=word_start[1:])
            within = np.arange(len(index), dtype=np.int64) - word_start[seg_of_word]
            item_table[item_start[seg_of_word] + within] = index
            item_table[item_start[:-1][is_special]] = n_table + np.arange(
                len(special_ids), dtype=np.int64)
            item_word = np.full(len(item_table), -1, dtype=np.int64)
            item_word[item_start[seg_of_word] + within] = np.arange(len(index), dtype=np.int64)
            items_per_seg = items_per_seg.astype(np.int64)
        else:
            item_table, items_per_seg = index, per_seg
            item_word = np.arange(len(index), dtype=np.int64)
        # items -> tokens, and each token's item
        lengths, ids = gather_runs(offsets, values, item_table)
        token_item = run_index(lengths)
        # each row's first item and first token: the rows' list offsets come from the
        # running token count at each row's first item (no per-token row index)
        seg_row = seg.get_column("row").to_numpy().astype(np.int64)
        items_per_row = np.bincount(seg_row, weights=items_per_seg,
                                    minlength=n).astype(np.int64)
        row_item_start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(items_per_row, out=row_item_start[1:])
        item_token_start = np.zeros(len(item_table) + 1, dtype=np.int64)
        np.cumsum(lengths, out=item_token_start[1:])
        row_offsets = item_token_start[row_item_start]
        # an item's word index within its row, for each of its tokens
        word_in_row = np.arange(len(item_table), dtype=np.int64) - repeat_runs(
            row_item_start[:-1], items_per_row)
        out = pl.DataFrame({
            "ids": lists_from_offsets("ids", row_offsets, pl.Series("ids", ids,
                                                                    dtype=pl.UInt32)),
            "word_ids": lists_from_offsets("word_ids", row_offsets,
                                           pl.Series("word_ids", word_in_row[token_item])),
        })
        item_seg = run_index(items_per_seg)
        return out, token_item, item_word, item_seg

    def _encodings(self, out: pl.DataFrame) -> list[Encoding]:
        """Encoding objects of `encode_frame`'s rows: a text's later windows become the
        `overflowing` of its first."""
        tok = self._id_to_token
        ids_l = out.get_column("ids").to_list()
        wids_l = out.get_column("word_ids").to_list()
        types_l = (out.get_column("type_ids").to_list() if "type_ids" in out.columns
                   else [[0] * len(x) for x in ids_l])
        if "starts" in out.columns:
            offsets_l = [list(zip(a, b)) for a, b in zip(out.get_column("starts").to_list(),
                                                          out.get_column("ends").to_list())]
        else:
            offsets_l = [[] for _ in ids_l]
        rows = (out.get_column("overflow_to_sample_mapping").to_list()
                if "overflow_to_sample_mapping" in out.columns else list(range(len(ids_l))))
        result: list[Encoding] = []
        last_row = None
        for ids, wids, types, offs, row in zip(ids_l, wids_l, types_l, offsets_l, rows):
            enc = Encoding(ids, [tok[i] for i in ids], wids, types, offs)
            if row == last_row:
                result[-1].overflowing.append(enc)
            else:
                result.append(enc)
                last_row = row
        return result

    @overload
    def encode_batch(self, texts: Iterable[str] | pl.Series, add_special_tokens: bool = ...,
                     as_arrow: Literal[False] = ...) -> list[Encoding]: ...

    @overload
    def encode_batch(self, texts: Iterable[str] | pl.Series, add_special_tokens: bool = ...,
                     *, as_arrow: Literal[True]) -> pa.ListArray: ...

    def encode_batch(self, texts: Iterable[str] | pl.Series, add_special_tokens: bool = True,
                     as_arrow: bool = False) -> list[Encoding] | pa.ListArray:
        """HF's `encode_batch`: one `Encoding` per text, with offsets (when the tokenizer's
        components have them, see `encode.offsets`) and, with truncation, the overflowing
        windows (`add_special_tokens=False`: without the post-processor's tokens).
        `as_arrow=True`: only the ids (of the first window), as one Arrow `list<uint32>` array
        (the columnar path of `encode_column`, no Python object per text or token;
        `pl.Series(result)` makes it a list[u32] Series)."""
        series = text_series(texts)
        if as_arrow:
            import pyarrow as pa  # deferred: training builds tokenizers, never encodes

            ids = self.encode_column(series, add_special_tokens=add_special_tokens)
            arr = ids.to_arrow()
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            return arr.cast(pa.list_(pa.uint32()))
        return self._encodings(self.encode_frame(
            series, add_special_tokens, offsets=offsets_supported(self.normalizer,
                                                                  self.pre_tokenizer)))

    def encode_ray(self, ds: Any, column: str = "text") -> Any:
        """A `ray.data.Dataset` with an `ids` column (list<uint32>) appended: the ids of its
        `column`, as `encode_ids` gives them, computed on Ray by actors each holding this
        tokenizer (lazy, as Ray Datasets are). Needs `pip install 'tokcolumnar[ray]'`."""
        from .distributed.ray import encode_dataset  # Ray loads only when used

        return encode_dataset(self, ds, column)

    def encode_column(self, data: pl.Series | pl.DataFrame, column: str = "text",
                      add_special_tokens: bool = True,
                      batch_rows: int = ENCODE_BATCH_ROWS) -> pl.Series:
        """The `ids` (list[u32]) of a string Series, or of `column` of a DataFrame, encoded in
        batches of `batch_rows` rows (one word cache across them); a null text gives null."""
        if isinstance(data, pl.DataFrame):
            if column not in data.columns:
                raise TokcolumnarValueError(f"no column {column!r} in the data frame "
                                            f"(columns: {', '.join(data.columns)})")
            data = data.get_column(column)
        texts = text_series(data)
        parts = []
        for start in range(0, max(len(texts), 1), batch_rows):
            batch = texts.slice(start, batch_rows)
            out = self.encode_frame(batch.fill_null(""), add_special_tokens, overflowing=False)
            parts.append(out.get_column("ids"))
        ids = pl.concat(parts) if parts else pl.Series("ids", [], dtype=pl.List(pl.UInt32))
        if texts.null_count():
            ids = pl.select(pl.when(texts.is_null()).then(None).otherwise(ids)).to_series()
        return ids.rename(texts.name or "ids")

    def encode_arrow(self, texts: Iterable[str] | pl.Series, add_special_tokens: bool = True,
                     offsets: bool = False, return_overflowing: bool = False) -> pa.Table:
        """Columnar `encode_batch`: an Arrow table with `ids`, `tokens`, `word_ids` and
        `type_ids` per text (no Python object per token); with `offsets`, an `offsets` column
        (list<struct<start: u32, end: u32>>, see `offsets_column`). With truncation and
        `return_overflowing`, one row per window and an `overflow_to_sample_mapping` column
        (u64, the text's index), as transformers' `return_overflowing_tokens=True`; else the
        first window of each text."""
        out = self.encode_frame(text_series(texts), add_special_tokens, offsets=offsets,
                                overflowing=return_overflowing)
        ids = out.get_column("ids")
        columns = {"ids": ids, "tokens": self.tokens_of(ids),
                   "word_ids": out.get_column("word_ids"), "type_ids": out.get_column("type_ids")}
        if offsets:
            columns["offsets"] = offsets_column(out)
        if return_overflowing and self.truncation_params is not None:
            columns["overflow_to_sample_mapping"] = out.get_column(
                "overflow_to_sample_mapping").cast(pl.UInt64)
        return pl.DataFrame(columns).to_arrow()

    def decode_column(self, ids: pl.Series, skip_special_tokens: bool = True) -> pl.Series:
        """The texts of a list[int] Series of ids, as `decode` gives them row by row (a null
        row gives null). With the decoders of our presets and most of HF's (`DecodeTable`)
        the column decodes by NumPy gathers, without a Python step per row."""
        if not isinstance(ids, pl.Series) or not isinstance(ids.dtype, (pl.List, pl.Array)):
            raise TokcolumnarTypeError("decode_column takes a Polars Series of id lists, got "
                                       f"{type(ids).__name__}")
        if isinstance(ids.dtype, pl.Array):
            ids = ids.cast(pl.List(ids.dtype.inner))
        self._check_id_column(ids)
        if self._decode_table is None or self._decode_table[0] is not self.decoder:
            self._decode_table = (self.decoder,
                                  DecodeTable.build(self._id_to_token, self.decoder))
        table = self._decode_table[1]
        if table is None:  # a decoder that is not positional: row by row
            return pl.Series(ids.name, [None if row is None else
                                        self.decode(row, skip_special_tokens)
                                        for row in ids.to_list()], dtype=pl.String)
        skip = None
        if skip_special_tokens:
            skip = np.zeros(len(self._id_to_token), dtype=bool)
            skip[[t.id for t in self.added_tokens if t.special]] = True
        return decode_rows(ids, table, skip)

    def _check_id_column(self, ids: pl.Series) -> None:
        """Every element of a list Series of ids is an id of this tokenizer (else the error
        `checked_ids` gives for the first bad one)."""
        if not ids.dtype.inner.is_integer():
            raise TokcolumnarTypeError(f"decode: token ids are integers, got {ids.dtype.inner}")
        flat = ids.explode().drop_nulls()
        if len(flat) != (ids.list.len().sum() or 0):
            raise TokcolumnarTypeError("decode: token ids are integers, got None")
        if not len(flat):
            return
        n = len(self._known_id)
        values = flat.cast(pl.Int64).to_numpy()
        bad = (values < 0) | (values >= n)
        bad[~bad] = ~self._known_id[values[~bad]]
        if bad.any():
            raise self._unknown_id(int(values[np.argmax(bad)]))

    def encode_pair_ids(self, firsts: Iterable[str], seconds: Iterable[str]) -> pl.DataFrame:
        """Pairs of sequences (ids, word_ids, type_ids, and `starts`/`ends` when the
        tokenizer has offsets): each side is encoded without the special tokens (its offsets
        trimmed as HF trims each), then the processor's pair template joins them. Without a
        post-processor the two sequences are concatenated (type id 1 for the second), as HF
        does."""
        if self.truncation_params is not None:
            raise TokcolumnarValueError("truncation of pairs of texts is not supported (call "
                                        "no_truncation() first)")
        offsets = offsets_supported(self.normalizer, self.pre_tokenizer)
        first, second = (self.encode_frame(text_series(list(texts)), add_special_tokens=False,
                                           offsets=offsets).drop("type_ids",
                                                                 "overflow_to_sample_mapping")
                         for texts in (firsts, seconds))
        processor = self.post_processor or ByteLevelProcessing()
        return processor.apply_pair(first, second, self._added_ids)

    def encode(self, text: str, pair: str | None = None) -> Encoding:
        """Encode one text, or a pair of texts (`[CLS] a [SEP] b [SEP]` with BERT)."""
        for name, value in (("text", text), ("pair", pair)):
            if not isinstance(value, str) and not (name == "pair" and value is None):
                raise TokcolumnarTypeError(f"encode: {name} must be a string, got "
                                           f"{type(value).__name__}")
        if pair is None:
            return self.encode_batch([text])[0]
        return self._encodings(self.encode_pair_ids([text], [pair]))[0]

    # -- decoding ------------------------------------------------------------------------------
    def checked_ids(self, ids: Iterable[int]) -> list[int]:
        """`ids` as a list of ints, every one an id of this tokenizer (else TypeError /
        ValueError naming the first bad one). HF skips unknown ids; a wrong id is a bug in the
        caller, so it is refused here."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TokcolumnarTypeError(f"decode takes a sequence of token ids, got "
                                       f"{type(ids).__name__}")
        out = []
        n = len(self._known_id)
        for x in ids:
            if not isinstance(x, numbers.Integral) or isinstance(x, (bool, np.bool_)):
                raise TokcolumnarTypeError(f"decode: token ids are integers, got {x!r}")
            i = int(x)
            if not (0 <= i < n and self._known_id[i]):
                raise self._unknown_id(i)
            out.append(i)
        return out

    def _unknown_id(self, i: int) -> TokcolumnarValueError:
        """The error for an id this tokenizer does not have (`checked_ids`, `decode_column`)."""
        return TokcolumnarValueError(f"decode: {i} is not a token id of this tokenizer (ids go "
                                     f"from 0 to {len(self._known_id) - 1})")

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        special = {t.id for t in self.added_tokens if t.special}
        tokens = [self._id_to_token[i] for i in self.checked_ids(ids)
                  if not (skip_special_tokens and i in special)]
        if self.decoder is None:
            return " ".join(tokens)
        return self.decoder.decode(tokens)


@pl.api.register_expr_namespace("tok")
class TokExpressions:
    """`pl.col("text").tok.encode(tokenizer)` (list[u32] ids) and `.tok.decode(tokenizer)`,
    in eager and lazy plans."""

    def __init__(self, expr: pl.Expr):
        self._expr = expr

    def encode(self, tokenizer: Tokenizer, add_special_tokens: bool = True) -> pl.Expr:
        return self._expr.map_batches(
            lambda s: tokenizer.encode_column(s, add_special_tokens=add_special_tokens),
            return_dtype=pl.List(pl.UInt32))

    def decode(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> pl.Expr:
        return self._expr.map_batches(
            lambda s: tokenizer.decode_column(s, skip_special_tokens),
            return_dtype=pl.String)


def offsets_column(frame: pl.DataFrame) -> pl.Series:
    """The `offsets` column of an encoding frame's `starts` and `ends`: one list of
    {start, end} per row (Parquet list<struct<start: u32, end: u32>>; HF's `Encoding.offsets`
    as (start, end) character spans)."""
    import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

    ids_off, starts = list_parts(frame.get_column("starts"))
    _, ends = list_parts(frame.get_column("ends"))
    spans = pa.StructArray.from_arrays([pa.array(starts, pa.uint32()), pa.array(ends,
                                                                               pa.uint32())],
                                       names=["start", "end"])
    return pl.Series("offsets", pa.LargeListArray.from_arrays(pa.array(ids_off), spans))


def text_series(texts: Any) -> pl.Series:
    """Texts to encode as a string Series; anything else is a `TokcolumnarTypeError` naming the
    first item that is not a string (a Series keeps its nulls)."""
    if isinstance(texts, pl.Series):
        if texts.dtype not in (pl.String, pl.Null):
            raise TokcolumnarTypeError(f"texts to encode must be strings, got a Series of "
                                       f"{texts.dtype}")
        return texts.cast(pl.String)
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise TokcolumnarTypeError(f"encode_batch takes a list of texts, got "
                                   f"{type(texts).__name__} (use encode for one text)")
    items = list(texts)
    try:
        series = pl.Series("text", items, dtype=pl.String, strict=True)
    except (TypeError, pl.exceptions.PolarsError):
        series = None
    if series is None or series.null_count():
        k, bad = next((k, x) for k, x in enumerate(items) if not isinstance(x, str))
        raise TokcolumnarTypeError(f"texts to encode must be strings; item {k} is "
                                   f"{type(bad).__name__}")
    return series


#: Where a training run whose tokenizer HF's format cannot express exactly keeps it (instead
#: of tokenizer.json; export.inexact_side_files decides): the same JSON, which `from_dir` loads
#: with the run.json settings HF's format has no field for.
OWN_TOKENIZER_FILE = "tokenizer.tokcolumnar.json"


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file; a missing, unreadable, empty or invalid file is one clear error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokcolumnarError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TokcolumnarError(f"cannot read {path}: {e}") from None
    if not text.strip():
        raise TokcolumnarValueError(f"{path} is empty (not a {what})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TokcolumnarValueError(f"{path} is not valid JSON ({e}; truncated?)") from None
    except RecursionError:  # nested deeper than Python's parser goes (~1,000 levels)
        raise TokcolumnarValueError(f"{path}: {too_deep()}") from None


def run_settings(path: Path) -> dict[str, Any]:
    """The settings of a training run's `run.json` that loading uses (none when there is no
    run.json); a run.json that is not JSON, has no `settings` object or mistyped settings is
    refused."""
    if not path.exists():
        return {}
    run = HFObject(read_json(path, "run.json"), f"{path}")
    settings = HFObject(run.obj("settings"), f"{path}: settings")
    for name in ("end_of_word_token", "pre_tokenizer", "cjk_split"):
        settings.str(name, None, nullable=True)
    return settings.d
