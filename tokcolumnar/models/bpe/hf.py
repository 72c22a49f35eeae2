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
    does not implement (dropout, ignore_merges on the model, byte_fallback without all 256
    byte pieces or with a prefix or suffix) refused rather than ignored."""
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
    if obj.bool("ignore_merges", False):
        raise obj.error("ignore_merges=true is not supported by tokcolumnar's encoder")
    byte_fallback = obj.bool("byte_fallback", False)
    prefix = obj.str("continuing_subword_prefix", None, nullable=True)
    suffix = obj.str("end_of_word_suffix", None, nullable=True)
    if byte_fallback:
        # HF spells the *prefixed* string's bytes, and a missing byte piece sends the character
        # to the unknown token (after the byte pieces before it): neither is implemented
        if prefix or suffix:
            raise obj.error("byte_fallback=true with a continuing_subword_prefix or an "
                            "end_of_word_suffix is not supported by tokcolumnar's encoder")
        missing = [f"<0x{b:02X}>" for b in range(256) if f"<0x{b:02X}>" not in vocab]
        if missing:
            raise obj.error(f"byte_fallback=true needs the 256 byte pieces in the vocabulary "
                            f"(tokcolumnar's encoder); {len(missing)} are missing, e.g. "
                            f"{missing[0]}")
    return dict(vocab=vocab, merges=merges,
                fuse_unk=obj.bool("fuse_unk", False), byte_fallback=byte_fallback,
                continuing_subword_prefix=prefix, end_of_word_suffix=suffix,
                end_of_word_token=obj.str("end_of_word_token", None, nullable=True),
                unk_token=obj.str("unk_token", None, nullable=True))


def hf_object(vocab: dict[str, int], merges: list[tuple[str, str]],
              continuing_subword_prefix: str | None, end_of_word_suffix: str | None,
              end_of_word_token: str | None, unk_token: str | None, fuse_unk: bool = False,
              byte_fallback: bool = False) -> dict[str, Any]:
    """The `model` object of `tokenizer.json` for these fields."""
    return {
        "type": "BPE", "dropout": None, "unk_token": unk_token,
        "continuing_subword_prefix": continuing_subword_prefix,
        "end_of_word_suffix": end_of_word_suffix, "fuse_unk": fuse_unk,
        "byte_fallback": byte_fallback, "ignore_merges": False,
        "vocab": vocab, "merges": [[a, b] for a, b in merges],
        # not an HF field: only in the tokenizer file of an --end-of-word-token run, which
        # is never written as tokenizer.json (export.inexact_side_files)
        **({"end_of_word_token": end_of_word_token}
           if end_of_word_token is not None else {}),
    }
