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
- `cl100k`, `o200k`, `qwen2` (`--pattern NAME` with the 256 bytes as initial alphabet):
  `Split(Regex(p), "isolated")` + `ByteLevel(add_prefix_space=False, use_regex=False)`, the
  256-byte alphabet, no special token (tokcolumnar/text/patterns.py has the patterns).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PATTERN_MODES = ("cl100k", "o200k", "qwen2")
MODES = ("whitespace", "gpt2", "bert", "whitespace-split", *PATTERN_MODES)
NORMALIZERS = ("none", "bert")

HF_TRAIN_SCRIPT = r"""
import json, sys
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers, decoders
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
elif mode in ("cl100k", "o200k", "qwen2"):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(sys.argv[6]), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
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
    extra = [pattern_regex(mode)] if mode in PATTERN_MODES else []
    return [sys.executable, "-c", HF_TRAIN_SCRIPT, listed, str(vocab_size), mode, normalizer,
            str(out), *extra]


def pattern_regex(name: str) -> str:
    """A named pattern's regex (from the checkout: the benchmarks run from its root)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tokcolumnar.text.patterns import named_pattern

    return named_pattern(name).regex


# rustbpe (karpathy/nanochat's trainer, `pip install rustbpe`): train_from_iterator over the
# file's lines (line ends kept, as HF and we read them) with the same pattern and vocabulary
# size (the 256 bytes + merges); its ranks are saved as [[token bytes as latin-1, rank], ...]
RUSTBPE_TRAIN_SCRIPT = r"""
import json, sys
import rustbpe
path, vocab_size, pattern, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def lines():
    with open(path, encoding="utf-8", newline="") as f:
        yield from f
tok = rustbpe.Tokenizer()
tok.train_from_iterator(lines(), vocab_size, pattern=pattern)
ranks = tok.get_mergeable_ranks()
with open(out, "w") as f:
    json.dump([[bytes(b).decode("latin-1"), r] for b, r in ranks], f)
"""


def rustbpe_train_command(path: str | Path, vocab_size: int, mode: str, out: Path) -> list[str]:
    """The child process that trains rustbpe with the pattern of `mode` on one file."""
    if mode not in PATTERN_MODES and mode != "gpt2":
        raise ValueError(f"rustbpe has no reference of mode {mode!r}")
    return [sys.executable, "-c", RUSTBPE_TRAIN_SCRIPT, str(path), str(vocab_size),
            pattern_regex(mode), str(out)]


def merges_of(tokenizer_json: Path) -> list:
    """The merges of a saved tokenizer.json (ours or HF's), to compare them."""
    return json.loads(tokenizer_json.read_text())["model"]["merges"]
