"""Post-processors: add special tokens around encoded sequences (`[CLS] A [SEP]`), columnar.

Each processor takes the model output as a DataFrame with `ids` (list[u32]) and `word_ids`
(list[i64]) per row, and returns the final `ids`, `word_ids` (null for added tokens) and
`type_ids`, exactly as HF's processors of the same JSON do. Supported `tokenizer.json` types:
`TemplateProcessing`, `BertProcessing`, `RobertaProcessing`, `ByteLevel` (ids unchanged) and
`Sequence`. When the input also has `starts` and `ends` (token offsets), they are carried along,
(0, 0) for the special tokens added, as HF gives them; the offset trimming of ByteLevel and
RobertaProcessing (`trim_offsets`) is done by the tokenizer before (see `offset_trimming`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import arrow_values, repeat_runs, series_from_arrow
from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, component_type, is_json_int

IDS = pl.List(pl.UInt32)
WIDS = pl.List(pl.Int64)
OFFSETS = ("starts", "ends")  # the optional offset columns (list[u32] each)


def _has_offsets(*frames: pl.DataFrame) -> bool:
    return all(all(c in f.columns for c in OFFSETS) for f in frames)


def _lit_list(values: list[Any], dtype: pl.DataType) -> pl.Expr:
    return pl.lit(pl.Series([values], dtype=dtype))


def _flat(lists: pl.Series, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """A null-free list column as (offsets from 0, int64; its values)."""
    import pyarrow as pa  # deferred: training builds post-processors, never encodes

    arr = lists.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    offsets = arrow_values(arr.offsets, np.int64)
    values = arrow_values(arr.values, dtype)
    return offsets - offsets[0], values[offsets[0]:offsets[-1]]


def _lists(name: str, offsets: np.ndarray, values: np.ndarray,
           valid: np.ndarray | None = None) -> pl.Series:
    """A list column from its offsets and flat values (`valid`: which values are not null)."""
    import pyarrow as pa  # deferred: training builds post-processors, never encodes

    kind = {np.dtype(np.uint32): pa.uint32(), np.dtype(np.int64): pa.int64()}[values.dtype]
    bitmap = None
    if valid is not None and not valid.all():
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    flat = pa.Array.from_buffers(kind, len(values), [bitmap, pa.py_buffer(values)])
    arrow_offsets = pa.Array.from_buffers(pa.int64(), len(offsets),
                                          [None, pa.py_buffer(offsets)])
    return series_from_arrow(name, pa.LargeListArray.from_arrays(arrow_offsets, flat))


@dataclass
class Piece:
    """One template item: a special token (`id` = its name) or a sequence (`id` = A or B)."""

    kind: str  # "special" | "sequence"
    id: str
    type_id: int = 0

    def to_hf(self) -> dict[str, Any]:
        key = "SpecialToken" if self.kind == "special" else "Sequence"
        return {key: {"id": self.id, "type_id": self.type_id}}

    @classmethod
    def from_hf(cls, d: Any, where: str = "template piece") -> Piece:
        obj = HFObject(d, where)
        for key, kind in (("SpecialToken", "special"), ("Sequence", "sequence")):
            if obj.has(key):
                inner = HFObject(obj.raw(key), f"{where} {key}")
                name = inner.str("id")
                if kind == "sequence" and name not in ("A", "B"):
                    raise inner.error(f"'id' must be \"A\" or \"B\", got {name!r}")
                return cls(kind, name, inner.int("type_id"))
        raise TokcolumnarValueError(f"unsupported template piece: {d!r}")

    @classmethod
    def parse(cls, s: str) -> Piece:
        """HF's template syntax: `$A`, `$B`, `$` (= `$A`), `$A:1`, `[SEP]`, `[SEP]:1`."""
        name, _, tid = s.partition(":")
        type_id = int(tid) if tid else 0
        if name.startswith("$"):
            seq = name[1:] or "A"
            if seq not in ("A", "B"):
                raise TokcolumnarValueError(f"template sequence must be $A or $B, got {s!r}")
            return cls("sequence", seq, type_id)
        return cls("special", name, type_id)


@dataclass
class SpecialSpec:
    id: str
    ids: list[int]
    tokens: list[str]

    def to_hf(self) -> dict[str, Any]:
        return {"id": self.id, "ids": list(self.ids), "tokens": list(self.tokens)}


class PostProcessor:
    """Base class: `apply(df, added_ids)` for single sequences, `apply_pair(a, b, added_ids)`
    for pairs; both return a DataFrame with ids, word_ids and type_ids."""

    hf_type: ClassVar[str] = ""

    def apply(self, df: pl.DataFrame, added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        raise NotImplementedError

    def _assemble_flat(self, df: pl.DataFrame) -> pl.DataFrame:
        """`apply` for a single template with one sequence and no offsets, on the flat
        values with NumPy: Polars' `concat_list` of the three columns took a third of the
        encoding time of Chinese text. Each row's tokens move right by the special tokens
        before them, each special token is written at its place in every row."""
        offsets, ids = _flat(df.get_column("ids").cast(IDS), np.uint32)
        _, wids = _flat(df.get_column("word_ids").cast(WIDS), np.int64)
        lengths = np.diff(offsets)
        n = len(lengths)
        specials = sum(len(self.special_tokens[p.id].ids) for p in self.single
                       if p.kind == "special")
        out_offsets = offsets + specials * np.arange(n + 1, dtype=np.int64)
        total = int(out_offsets[-1])
        out_ids = np.empty(total, dtype=np.uint32)
        out_wids = np.zeros(total, dtype=np.int64)
        valid = np.ones(total, dtype=bool)  # word id null for the special tokens
        out_types = np.empty(total, dtype=np.uint32)
        at = out_offsets[:-1].copy()  # where the next piece starts in each row
        for p in self.single:
            if p.kind == "special":
                spec = np.asarray(self.special_tokens[p.id].ids, dtype=np.uint32)
                where = (at[:, None] + np.arange(len(spec), dtype=np.int64)).ravel()
                out_ids[where] = np.tile(spec, n)
                valid[where] = False
                out_types[where] = p.type_id
                at += len(spec)
            else:  # the row's tokens, in order
                where = repeat_runs(at - offsets[:-1], lengths) + np.arange(len(ids),
                                                                           dtype=np.int64)
                out_ids[where] = ids
                out_wids[where] = wids
                out_types[where] = p.type_id
                at += lengths
        return pl.DataFrame({"ids": _lists("ids", out_offsets, out_ids),
                             "word_ids": _lists("word_ids", out_offsets, out_wids, valid),
                             "type_ids": _lists("type_ids", out_offsets, out_types)})

    def apply_pair(self, a: pl.DataFrame, b: pl.DataFrame,
                   added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        raise NotImplementedError

    def added_tokens(self, is_pair: bool = False) -> int:
        """How many tokens the processor adds (HF `num_special_tokens_to_add`)."""
        return 0


def _with_type_ids(df: pl.DataFrame, type_id: int = 0) -> pl.DataFrame:
    return df.select(pl.col("ids").cast(IDS), pl.col("word_ids").cast(WIDS),
                     pl.lit(type_id, dtype=pl.UInt32).repeat_by(pl.col("ids").list.len())
                     .cast(IDS).alias("type_ids"),
                     *([pl.col(c).cast(IDS) for c in OFFSETS] if _has_offsets(df) else []))


def offset_trimming(processor: PostProcessor | None) -> bool | None:
    """HF trims the offsets of byte-level tokens (`trim_offsets` of a ByteLevel or
    RobertaProcessing post-processor): None when it does not, else its `add_prefix_space`."""
    if isinstance(processor, SequenceProcessing):
        found = [offset_trimming(p) for p in processor.processors]
        return next((f for f in found if f is not None), None)
    if isinstance(processor, (ByteLevelProcessing, RobertaProcessing)) and processor.trim_offsets:
        return processor.add_prefix_space
    return None


@dataclass
class TemplateProcessing(PostProcessor):
    """HF `TemplateProcessing`: a single and a pair template over special tokens and $A/$B."""

    hf_type: ClassVar[str] = "TemplateProcessing"
    single: list[Piece]
    pair: list[Piece]
    special_tokens: dict[str, SpecialSpec] = field(default_factory=dict)

    @classmethod
    def from_strings(cls, single: str, pair: str,
                     special_tokens: list[tuple[str, int]]) -> TemplateProcessing:
        specs = {t: SpecialSpec(t, [i], [t]) for t, i in special_tokens}
        out = cls([Piece.parse(x) for x in single.split()],
                  [Piece.parse(x) for x in pair.split()], specs)
        out.check()
        return out

    def check(self) -> None:
        for p in self.single + self.pair:
            if p.kind == "special" and p.id not in self.special_tokens:
                raise TokcolumnarValueError(f"template uses {p.id!r}, which has no id in "
                                            "special_tokens")
        if any(p.kind == "sequence" and p.id == "B" for p in self.single):
            raise TokcolumnarValueError("the single template cannot use $B")

    def to_hf(self) -> dict[str, Any]:
        return {"type": "TemplateProcessing",
                "single": [p.to_hf() for p in self.single],
                "pair": [p.to_hf() for p in self.pair],
                "special_tokens": {k: v.to_hf() for k, v in self.special_tokens.items()}}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> TemplateProcessing:
        f = HFObject(d, "post_processor TemplateProcessing")
        specs = {}
        for k, v in (f.obj("special_tokens", None, nullable=True) or {}).items():
            spec = HFObject(v, f"{f.where} special_tokens[{k!r}]")
            ids = spec.list("ids")
            if not all(is_json_int(i) and i >= 0 for i in ids):
                raise spec.error(f"'ids' must hold non-negative integers, got {ids!r}")
            specs[k] = SpecialSpec(spec.str("id", k), ids, spec.str_list("tokens", []))
        out = cls([Piece.from_hf(x, f"{f.where} single[{i}]")
                   for i, x in enumerate(f.list("single", []))],
                  [Piece.from_hf(x, f"{f.where} pair[{i}]")
                   for i, x in enumerate(f.list("pair", []))], specs)
        out.check()
        return out

    def added_tokens(self, is_pair: bool = False) -> int:
        return sum(len(self.special_tokens[p.id].ids)
                   for p in (self.pair if is_pair else self.single) if p.kind == "special")

    def _assemble(self, template: list[Piece], frame: pl.DataFrame) -> pl.DataFrame:
        offsets = "starts_A" in frame.columns
        ids, wids, types = [], [], []
        spans: dict[str, list[pl.Expr]] = {c: [] for c in OFFSETS}
        for p in template:
            if p.kind == "special":
                spec = self.special_tokens[p.id]
                n = len(spec.ids)
                ids.append(_lit_list(spec.ids, IDS))
                wids.append(_lit_list([None] * n, WIDS))
                types.append(_lit_list([p.type_id] * n, IDS))
                for c in OFFSETS:  # HF gives the added special tokens (0, 0)
                    spans[c].append(_lit_list([0] * n, IDS))
            else:
                col = f"ids_{p.id}"
                ids.append(pl.col(col))
                wids.append(pl.col(f"word_ids_{p.id}"))
                types.append(pl.lit(p.type_id, dtype=pl.UInt32).repeat_by(
                    pl.col(col).list.len()).cast(IDS))
                for c in OFFSETS:
                    spans[c].append(pl.col(f"{c}_{p.id}"))
        extra = [c for c in OFFSETS] if offsets else []
        if not ids:
            return frame.select(pl.lit([], dtype=IDS).alias("ids"),
                                pl.lit([], dtype=WIDS).alias("word_ids"),
                                pl.lit([], dtype=IDS).alias("type_ids"),
                                *[pl.lit([], dtype=IDS).alias(c) for c in extra])
        return frame.select(pl.concat_list(ids).cast(IDS).alias("ids"),
                            pl.concat_list(wids).cast(WIDS).alias("word_ids"),
                            pl.concat_list(types).cast(IDS).alias("type_ids"),
                            *[pl.concat_list(spans[c]).cast(IDS).alias(c) for c in extra])

    def apply(self, df: pl.DataFrame, added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        if not _has_offsets(df) and [p.id for p in self.single if p.kind == "sequence"] == ["A"]:
            return self._assemble_flat(df)
        frame = df.select(pl.col("ids").cast(IDS).alias("ids_A"),
                          pl.col("word_ids").cast(WIDS).alias("word_ids_A"),
                          *([pl.col(c).cast(IDS).alias(f"{c}_A") for c in OFFSETS]
                            if _has_offsets(df) else []))
        return self._assemble(self.single, frame)

    def apply_pair(self, a: pl.DataFrame, b: pl.DataFrame,
                   added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        if a.height != b.height:
            raise TokcolumnarValueError(f"pair encoding needs as many second sequences as first "
                                        f"ones ({a.height} != {b.height})")
        frame = pl.DataFrame({"ids_A": a.get_column("ids").cast(IDS),
                              "word_ids_A": a.get_column("word_ids").cast(WIDS),
                              "ids_B": b.get_column("ids").cast(IDS),
                              "word_ids_B": b.get_column("word_ids").cast(WIDS),
                              **({f"{c}_{side}": f.get_column(c).cast(IDS)
                                  for c in OFFSETS for side, f in (("A", a), ("B", b))}
                                 if _has_offsets(a, b) else {})})
        return self._assemble(self.pair, frame)


@dataclass
class BertProcessing(TemplateProcessing):
    """HF `BertProcessing(sep, cls)`: `[CLS] A [SEP]`, pair `[CLS] A [SEP] B:1 [SEP]:1`."""

    hf_type: ClassVar[str] = "BertProcessing"
    sep: tuple[str, int] = ("[SEP]", 102)
    cls: tuple[str, int] = ("[CLS]", 101)

    @classmethod
    def make(cls, sep: tuple[str, int], cls_: tuple[str, int]) -> BertProcessing:
        specs = {"[CLS]": SpecialSpec("[CLS]", [cls_[1]], [cls_[0]]),
                 "[SEP]": SpecialSpec("[SEP]", [sep[1]], [sep[0]])}
        single = [Piece("special", "[CLS]"), Piece("sequence", "A"), Piece("special", "[SEP]")]
        pair = single + [Piece("sequence", "B", 1), Piece("special", "[SEP]", 1)]
        return cls(single, pair, specs, tuple(sep), tuple(cls_))  # type: ignore[arg-type]

    def to_hf(self) -> dict[str, Any]:
        return {"type": "BertProcessing", "sep": [self.sep[0], self.sep[1]],
                "cls": [self.cls[0], self.cls[1]]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> BertProcessing:  # type: ignore[override]
        f = HFObject(d, "post_processor BertProcessing")
        return cls.make(token_and_id(f, "sep"), token_and_id(f, "cls"))


@dataclass
class RobertaProcessing(TemplateProcessing):
    """HF `RobertaProcessing(sep, cls)`: `<s> A </s>`, pair `<s> A </s> </s> B </s>`, every
    type id 0 (as HF 0.23). `trim_offsets`/`add_prefix_space` only affect offsets."""

    hf_type: ClassVar[str] = "RobertaProcessing"
    sep: tuple[str, int] = ("</s>", 2)
    cls: tuple[str, int] = ("<s>", 0)
    trim_offsets: bool = True
    add_prefix_space: bool = True

    @classmethod
    def make(cls, sep: tuple[str, int], cls_: tuple[str, int], trim_offsets: bool = True,
             add_prefix_space: bool = True) -> RobertaProcessing:
        specs = {"<cls>": SpecialSpec(cls_[0], [cls_[1]], [cls_[0]]),
                 "<sep>": SpecialSpec(sep[0], [sep[1]], [sep[0]])}
        single = [Piece("special", "<cls>"), Piece("sequence", "A"), Piece("special", "<sep>")]
        pair = single + [Piece("special", "<sep>"), Piece("sequence", "B"),
                         Piece("special", "<sep>")]
        return cls(single, pair, specs, tuple(sep), tuple(cls_),  # type: ignore[arg-type]
                   trim_offsets, add_prefix_space)

    def to_hf(self) -> dict[str, Any]:
        return {"type": "RobertaProcessing", "sep": [self.sep[0], self.sep[1]],
                "cls": [self.cls[0], self.cls[1]], "trim_offsets": self.trim_offsets,
                "add_prefix_space": self.add_prefix_space}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> RobertaProcessing:  # type: ignore[override]
        f = HFObject(d, "post_processor RobertaProcessing")
        return cls.make(token_and_id(f, "sep"), token_and_id(f, "cls"),
                        f.bool("trim_offsets", True), f.bool("add_prefix_space", True))


@dataclass
class ByteLevelProcessing(PostProcessor):
    """HF `ByteLevel` post-processor: it only trims offsets, so ids pass through."""

    hf_type: ClassVar[str] = "ByteLevel"
    add_prefix_space: bool = True
    trim_offsets: bool = True
    use_regex: bool = True

    def apply(self, df: pl.DataFrame, added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        return _with_type_ids(df)

    def apply_pair(self, a: pl.DataFrame, b: pl.DataFrame,
                   added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        # HF without a template concatenates the pair, type id 1 for the second sequence
        x, y = _with_type_ids(a), _with_type_ids(b, 1)
        return pl.DataFrame({name: x.get_column(name).list.concat(y.get_column(name))
                             for name in x.columns if name in y.columns})

    def to_hf(self) -> dict[str, Any]:
        return {"type": "ByteLevel", "add_prefix_space": self.add_prefix_space,
                "trim_offsets": self.trim_offsets, "use_regex": self.use_regex}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> ByteLevelProcessing:
        f = HFObject(d, "post_processor ByteLevel")
        return cls(f.bool("add_prefix_space", True), f.bool("trim_offsets", True),
                   f.bool("use_regex", True))


@dataclass
class SequenceProcessing(PostProcessor):
    """HF `Sequence` of post-processors, applied in order (the first one that joins a pair
    does the joining; the others then see a single sequence)."""

    hf_type: ClassVar[str] = "Sequence"
    processors: list[PostProcessor] = field(default_factory=list)

    def apply(self, df: pl.DataFrame, added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        out = _with_type_ids(df)
        for p in self.processors:
            types = out.get_column("type_ids")
            nxt = p.apply(out.drop("type_ids"), added_ids)
            if isinstance(p, ByteLevelProcessing):
                nxt = nxt.with_columns(types.alias("type_ids"))
            out = nxt
        return out

    def apply_pair(self, a: pl.DataFrame, b: pl.DataFrame,
                   added_ids: dict[str, int] | None = None) -> pl.DataFrame:
        rest = list(self.processors)
        while rest and isinstance(rest[0], ByteLevelProcessing):
            rest.pop(0)
        if not rest:
            return ByteLevelProcessing().apply_pair(a, b, added_ids)
        out = rest[0].apply_pair(a, b, added_ids)
        if len(rest) > 1:
            tail = SequenceProcessing(rest[1:])
            types = out.get_column("type_ids")
            out = tail.apply(out.drop("type_ids"), added_ids)
            if all(isinstance(p, ByteLevelProcessing) for p in rest[1:]):
                out = out.with_columns(types.alias("type_ids"))
        return out

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "processors": [p.to_hf() for p in self.processors]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> SequenceProcessing:
        parts = HFObject(d, "post_processor Sequence").list("processors", [])
        return cls([p for p in (post_processor_from_hf(x) for x in parts) if p is not None])


PROCESSORS: dict[str, Any] = {
    "TemplateProcessing": TemplateProcessing, "BertProcessing": BertProcessing,
    "RobertaProcessing": RobertaProcessing, "ByteLevel": ByteLevelProcessing,
    "Sequence": SequenceProcessing,
}


def token_and_id(f: HFObject, key: str) -> tuple[str, int]:
    """A `[token, id]` field (BertProcessing's `sep` and `cls`)."""
    value = f.list(key)
    if not (len(value) == 2 and isinstance(value[0], str) and is_json_int(value[1])
            and value[1] >= 0):
        raise f.error(f"{key!r} must be [token, id], got {value!r}")
    return value[0], value[1]


def post_processor_from_hf(d: Any) -> PostProcessor | None:
    """Build a post-processor from its `tokenizer.json` object (None stays None); an
    unsupported type or a mistyped field is refused."""
    if d is None:
        return None
    _, kind = component_type(d, "post_processor")
    cls = PROCESSORS.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported post_processor in tokenizer.json: {kind!r}")
    return cls.from_hf_dict(d)


def bert_template(vocab: dict[str, int], cls_token: str = "[CLS]",
                  sep_token: str = "[SEP]") -> TemplateProcessing:
    """The BERT template, `[CLS] $A [SEP]` / `[CLS] $A [SEP] $B:1 [SEP]:1`, with the ids of
    `vocab` (the JSON HF writes for the same `TemplateProcessing`)."""
    missing = [t for t in (cls_token, sep_token) if t not in vocab]
    if missing:
        raise TokcolumnarValueError(f"the BERT post-processor needs {' and '.join(missing)} in the "
                                    "vocabulary (add them with --special-tokens)")
    return TemplateProcessing.from_strings(
        f"{cls_token} $A {sep_token}", f"{cls_token} $A {sep_token} $B:1 {sep_token}:1",
        [(cls_token, vocab[cls_token]), (sep_token, vocab[sep_token])])
