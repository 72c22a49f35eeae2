"""The BPE model's object in `tokenizer.json`: read and checked (`fields_from_hf`), and written
(`hf_object`). `model.BPEModel.from_hf` / `to_hf` go through these."""

from __future__ import annotations

from typing import Any

from ...hfjson import HFObject
from ..base import vocab_from_hf


def fields_from_hf(obj: HFObject) -> dict[str, Any]:
    """The model's fields (`BPEModel`'s arguments) from its `model` object, checked: the fields
    HF requires (vocab, merges) and their types; every merge as HF reads it (`"a b"` split on
    its one space, or `["a", "b"]`); the options that change encoding and that this encoder
    does not implement (dropout, byte_fallback, fuse_unk, ignore_merges) refused rather than
    ignored."""
    vocab = vocab_from_hf(obj)
    merges = []
    for rank, m in enumerate(obj.list("merges")):
        text = isinstance(m, str)
        pair = m.split(" ") if text else m
        # (a split string holds strings: only lists need their items checked; the
        # checks run once per merge, tens of thousands, before the first batch)
        if not (isinstance(pair, list) and len(pair) == 2
                and (text or (isinstance(pair[0], str) and isinstance(pair[1], str)))):
            raise obj.error(f"merge {rank} must be \"left right\" or [left, right], "
                            f"got {m!r}")
        merges.append((pair[0], pair[1]))
    dropout = obj.number("dropout", None, nullable=True)
    if dropout is not None and not 0 <= dropout <= 1:
        raise obj.error(f"'dropout' must be between 0 and 1, got {dropout}")
    if dropout:
        raise obj.error(f"dropout {dropout} is not supported (tokcolumnar encodes "
                        "deterministically; set it to null)")
    for name in ("fuse_unk", "byte_fallback", "ignore_merges"):
        if obj.bool(name, False):
            raise obj.error(f"{name}=true is not supported by tokcolumnar's encoder")
    return dict(vocab=vocab, merges=merges,
                continuing_subword_prefix=obj.str("continuing_subword_prefix", None,
                                                  nullable=True),
                end_of_word_suffix=obj.str("end_of_word_suffix", None, nullable=True),
                end_of_word_token=obj.str("end_of_word_token", None, nullable=True),
                unk_token=obj.str("unk_token", None, nullable=True))


def hf_object(vocab: dict[str, int], merges: list[tuple[str, str]],
              continuing_subword_prefix: str | None, end_of_word_suffix: str | None,
              end_of_word_token: str | None, unk_token: str | None) -> dict[str, Any]:
    """The `model` object of `tokenizer.json` for these fields."""
    return {
        "type": "BPE", "dropout": None, "unk_token": unk_token,
        "continuing_subword_prefix": continuing_subword_prefix,
        "end_of_word_suffix": end_of_word_suffix, "fuse_unk": False,
        "byte_fallback": False, "ignore_merges": False,
        "vocab": vocab, "merges": [[a, b] for a, b in merges],
        # not an HF field: only in the tokenizer file of an --end-of-word-token run, which
        # is never written as tokenizer.json (export.inexact_side_files)
        **({"end_of_word_token": end_of_word_token}
           if end_of_word_token is not None else {}),
    }
