"""`encode --pack N`: the documents' ids, each followed by a separator token, concatenated and
cut into blocks of exactly N ids (the pre-training layout of HF's `run_clm` `group_texts`,
streamed: a document may span blocks, and only the ids not yet in a full block are carried
from one batch to the next).

The separator (`pack_separator`): `--pack-separator TOKEN` when given; else the `eos_token` of
a `tokenizer_config.json` beside the tokenizer (an HF model directory: `configured_eos`); else,
for a WordPiece model, its post-processor's SEP token (BERT's `[SEP]`), or an added `[SEP]`; for
a BPE model the first added token among `EOS_TOKENS` (the gpt2 preset's `<|endoftext|>`,
`</s>`, ...). A tokenizer with none of them is refused, naming --pack-separator."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from ..buffers import list_parts
from ..errors import TokcolumnarError
from ..models.wordpiece import WordPieceModel
from ..tokenizer import Tokenizer, read_json

#: The end-of-text tokens a BPE tokenizer's separator is looked for among, in this order
#: (GPT-2's, then Llama / T5 / RoBERTa's `</s>`, then other common spellings).
EOS_TOKENS = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>", "[EOS]",
              "<|im_end|>")


def configured_eos(tokenizer_path: str | os.PathLike) -> str | None:
    """The `eos_token` of the `tokenizer_config.json` in a tokenizer directory (or beside a
    tokenizer.json file): a string, or an added token's object with its `content`."""
    path = Path(tokenizer_path)
    config = (path if path.is_dir() else path.parent) / "tokenizer_config.json"
    if not config.is_file():
        return None
    eos = read_json(config, "tokenizer_config.json")
    eos = eos.get("eos_token") if isinstance(eos, dict) else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    return eos if isinstance(eos, str) and eos else None


def pack_separator(tok: Tokenizer, given: str | None = None,
                   configured: str | None = None) -> int:
    """The id that follows every document in a packed stream (see the module docstring);
    `configured`: the tokenizer's configured end-of-text token (`configured_eos`)."""
    for name, what in ((given, "--pack-separator"), (configured, "the eos_token of "
                                                     "tokenizer_config.json")):
        if name is not None:
            tid = tok.token_to_id(name)
            if tid is None:
                raise TokcolumnarError(f"{what} {name!r} is not a token of the tokenizer")
            return tid
    if isinstance(tok.model, WordPieceModel):
        sep = getattr(tok.post_processor, "sep", None)
        candidates: tuple[str, ...] = (sep[0],) if sep else ("[SEP]",)
    else:
        candidates = EOS_TOKENS
    added = tok.added_token_ids()
    for name in candidates:
        if name in added:
            return added[name]
    raise TokcolumnarError(
        f"--pack: the tokenizer has no end-of-text token to put after each document (looked "
        f"for {', '.join(candidates)}); name one with --pack-separator TOKEN")


class Packer:
    """Cuts the documents' ids (each followed by `separator`) into blocks of `size` ids, batch
    after batch; `finish` gives the last, shorter block (none with `drop_last`)."""

    def __init__(self, size: int, separator: int, drop_last: bool = False,
                 columns: tuple[str, ...] | list[str] = ("ids", "n_tokens")):
        self.size = size
        self.separator = np.uint32(separator)
        self.drop_last = drop_last
        self.columns = list(columns)  # of a block: ids and n_tokens, in the order asked
        self.carry = np.empty(0, dtype=np.uint32)  # ids not yet in a full block (< size)
        self.documents = 0
        self.total = 0  # ids in the stream, separators included

    def _table(self, flat: np.ndarray, block: int) -> pa.Table:
        n_blocks = -(-len(flat) // block)
        offsets = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * block, len(flat))
        made = {
            "ids": lambda: pa.LargeListArray.from_arrays(pa.array(offsets),
                                                         pa.array(flat, pa.uint32())),
            "n_tokens": lambda: pa.array(np.diff(offsets).astype(np.uint32)),
        }
        return pa.table({name: made[name]() for name in self.columns})

    def add(self, ids: pa.ChunkedArray | pa.Array) -> pa.Table:
        """The full blocks the next documents complete (possibly none)."""
        offsets, values = list_parts(pl.Series(ids))
        n_docs = len(offsets) - 1
        # each document's separator goes right after its ids: document i's ids move i
        # places to the right, its separator sits at its end offset + i
        stream = np.full(len(self.carry) + len(values) + n_docs, self.separator,
                         dtype=np.uint32)
        stream[:len(self.carry)] = self.carry
        body = np.ones(len(values) + n_docs, dtype=bool)
        body[offsets[1:] + np.arange(n_docs)] = False
        stream[len(self.carry):][body] = values
        self.documents += n_docs
        self.total += len(values) + n_docs
        # whole blocks out; the rest (fewer than `size` ids) waits for the next batch
        full = len(stream) // self.size * self.size
        self.carry = stream[full:].copy()
        return self._table(stream[:full], self.size)

    def finish(self) -> pa.Table:
        """The last block, shorter than `size` (empty with `drop_last` or when none is left)."""
        flat = self.carry if not self.drop_last else self.carry[:0]
        self.carry = self.carry[:0]
        return self._table(flat, self.size)
