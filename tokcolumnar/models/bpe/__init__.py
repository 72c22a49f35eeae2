"""The BPE model, encode side (`model.BPEModel`), with the structures its merge loop uses:
the pair index (`pair_index`), the crossing filter that cuts long words (`crossing`), the
characters a byte-level model starts from whole (`char_tokens`), and its `tokenizer.json`
object (`hf`)."""

from .model import BPEModel

__all__ = ["BPEModel"]
