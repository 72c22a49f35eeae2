"""The HF `tokenizers` side of the training benchmarks: one child script that trains the
reference configuration of each of our modes, so that every benchmark compares against the
same thing (bench_matrix, bench_train, bench_scale).

Modes (ours -> HF):
- `whitespace` (`--pre-tokenizer whitespace`): `Whitespace` + `BpeTrainer`; with the
  `bert` normalizer (ours `--normalizer bert`, no `--lowercase`), `BertNormalizer(lowercase=False)`.
- `gpt2` (`--preset gpt2`): `ByteLevel(add_prefix_space=False)`, the 256-byte alphabet and
  `<|endoftext|>`.
- `bert` (`--preset bert`): `WordPieceTrainer` with `BertNormalizer` + `BertPreTokenizer` and
  BERT's special tokens — the trainer BERT users run (frequency, not likelihood: merges differ).
- `whitespace-split`: `WhitespaceSplit` + `BpeTrainer`, for text a reference segmenter already
  cut into words joined by spaces (ours `--pre-tokenizer jieba|mecab` on the raw text).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MODES = ("whitespace", "gpt2", "bert", "whitespace-split")
NORMALIZERS = ("none", "bert")

HF_TRAIN_SCRIPT = r"""
import json, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers, decoders
inputs, vocab_size, mode, normalizer, out = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                             sys.argv[4], sys.argv[5])
inputs = json.loads(open(inputs[1:]).read() if inputs.startswith("@") else inputs)
if mode == "gpt2":
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                             special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
elif mode == "bert":
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tr = trainers.WordPieceTrainer(vocab_size=vocab_size, show_progress=False,
                                   special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
else:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = (pre_tokenizers.WhitespaceSplit() if mode == "whitespace-split"
                         else pre_tokenizers.Whitespace())
    if normalizer == "bert":
        tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
tok.train(inputs, tr)
tok.save(out)
"""


def hf_train_command(inputs: list[str | Path], vocab_size: int, mode: str, out: Path,
                     normalizer: str = "none") -> list[str]:
    """The child process that trains HF's reference of `mode` on `inputs` (files, in order)
    and saves its tokenizer.json as `out`. A long list of files (a folder of 10,000) goes
    through a file beside `out`, named `@file` on the command line (argv has a size limit)."""
    if mode not in MODES or normalizer not in NORMALIZERS:
        raise ValueError(f"no HF reference for mode {mode!r}, normalizer {normalizer!r}")
    listed = json.dumps([str(p) for p in inputs])
    if len(listed) > 10_000:
        list_file = Path(f"{out}.inputs.json")
        list_file.write_text(listed)
        listed = f"@{list_file}"
    return [sys.executable, "-c", HF_TRAIN_SCRIPT, listed, str(vocab_size), mode, normalizer,
            str(out)]


def merges_of(tokenizer_json: Path) -> list:
    """The merges of a saved tokenizer.json (ours or HF's), to compare them."""
    return json.loads(tokenizer_json.read_text())["model"]["merges"]
