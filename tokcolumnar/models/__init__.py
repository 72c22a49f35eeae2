"""Models: the encode side of BPE, WordPiece and Unigram (`base.Model`), and `model_from_hf`,
which reads the `model` object of a `tokenizer.json`."""

from __future__ import annotations

from typing import Any

from ..errors import TokcolumnarValueError
from ..hfjson import HFObject
from .base import Model
from .bpe import BPEModel
from .unigram import UnigramModel
from .wordpiece import WordPieceModel

__all__ = ["BPEModel", "MODEL_TYPES", "Model", "UnigramModel", "WordPieceModel",
           "model_from_hf"]

MODEL_TYPES: dict[str, type[Model]] = {"BPE": BPEModel, "WordPiece": WordPieceModel,
                                       "Unigram": UnigramModel}
# HF reads a model object without "type" by its fields (BPE first, then WordPiece)
UNTAGGED_FIELDS = (("BPE", ("vocab", "merges")),
                   ("WordPiece", ("vocab", "unk_token", "continuing_subword_prefix",
                                  "max_input_chars_per_word")))


def model_from_hf(d: Any) -> Model:
    obj = HFObject(d, "model")
    kind = obj.str("type", None)
    if kind is None:
        kind = next((k for k, fields in UNTAGGED_FIELDS if all(obj.has(f) for f in fields)),
                    None)
        if kind is None:
            raise obj.error("no 'type', and the fields are not those of a BPE or WordPiece model")
    cls = MODEL_TYPES.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported model in tokenizer.json: {kind!r} "
                                    f"(supported: {', '.join(MODEL_TYPES)})")
    return cls.from_hf(d)
