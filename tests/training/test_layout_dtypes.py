"""The merge loop's compact layout (int32 ids, links and word indexes; docs/architecture.md,
"Memory") on a vocabulary large enough that `left_id * n_tokens` overflows int32: the pair
count of the initial layout against a plain Python count, and a whole training run against
HuggingFace's `BpeTrainer`. And the uint16 ids of a vocabulary of up to 65,534 tokens
(`symbols.symbol_dtype`), at that edge, against HF."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from tests.support.corpora import corpus
from tokcolumnar import train
from tokcolumnar.layout import Layout
from tokcolumnar.training.passes import group_pairs
from tokcolumnar.training.symbols import build_initial

# 20,992 CJK unified ideographs and 30,000 of extension B: an alphabet of ~51,000 ids, so
# n_tokens**2 fits in 32 bits (the radix-sort path) but left_id * n_tokens does not fit in 31
CHARS = [chr(c) for c in range(0x4E00, 0xA000)] + [chr(c) for c in range(0x20000, 0x27530)]


def large_alphabet_words(seed: int = 7) -> list[str]:
    """Every character at least once (so the alphabet is all of CHARS), plus words that repeat
    so that the last ids make frequent pairs."""
    rng = random.Random(seed)
    words = ["".join(CHARS[i:i + 3]) for i in range(0, len(CHARS), 3)]
    tail = CHARS[-40:]
    words += ["".join(rng.choice(tail) for _ in range(rng.randint(2, 6))) for _ in range(3000)]
    return words


def test_initial_pair_counts_with_ids_past_int32_products():
    counts = Counter(large_alphabet_words())
    words = pl.DataFrame({"word": list(counts), "count": list(counts.values())},
                         schema={"word": pl.String, "count": pl.UInt64})
    initial = build_initial(words, [], None, [], None, None, None)
    n = len(initial.vocab)
    assert n * n < 1 << 32 and (n - 1) * n >= 1 << 31  # products past int32
    assert initial.layout.sym.dtype == np.int32
    groups = group_pairs(initial.layout, n)
    ids = initial.vocab.ids
    want: Counter = Counter()
    for word, c in counts.items():
        for a, b in zip(word, word[1:]):
            want[(ids[a], ids[b])] += c
    got = {(k >> 32, k & 0xFFFFFFFF): c
           for k, c in zip(groups.keys.tolist(), groups.counts.tolist())}
    assert got == dict(want)
    # each pair's positions name exactly its occurrences
    sym = initial.layout.sym
    for i in range(0, len(groups.keys), 997):
        pos = groups.positions[groups.starts[i]:groups.ends[i]]
        key = int(groups.keys[i])
        assert (sym[pos] == key >> 32).all() and (sym[pos + 1] == key & 0xFFFFFFFF).all()


def test_large_alphabet_training_identical_to_hf(tmp_path: Path):
    path = tmp_path / "large_alphabet.txt"
    words = large_alphabet_words()
    path.write_text("\n".join(" ".join(words[i:i + 10]) for i in range(0, len(words), 10))
                    + "\n", encoding="utf-8")
    vocab_size = len(CHARS) + 300
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=vocab_size, pre_tokenizer="whitespace")
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train([str(path)], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False))
    (tmp_path / "hf").mkdir()
    hf.model.save(str(tmp_path / "hf"))
    ours = (out / "merges.txt").read_text(encoding="utf-8")
    assert ours.count("\n") > 250  # merges beyond the alphabet happened
    assert ours == (tmp_path / "hf" / "merges.txt").read_text(encoding="utf-8")


@pytest.mark.corpus
@pytest.mark.parametrize("vocab_size,dtype", [(65534, np.uint16), (65535, np.int32)])
def test_uint16_ids_up_to_65534_tokens_identical_to_hf(vocab_size, dtype, tmp_path,
                                                       monkeypatch):
    """At 65,534 tokens the last id is 65,533, the largest below a uint16 layout's two marks
    (65,534 for a removed position, 65,535 for a SEP: `layout.marks`); one token more takes
    int32. Both runs (whitespace, 300 KB of Chinese and 300 KB of Japanese: a large alphabet
    and ~60,000 merges, so ids from the alphabet's to the edge are made and merged) give HF's
    merges."""
    paths = [str(corpus("small/zh_hongloumeng_300k.txt")),
             str(corpus("small/ja_wagahai_300k.txt"))]
    made = []
    lean = Layout.lean_from_chunks.__func__

    def recording(cls, *args, **kwargs):
        layout = lean(cls, *args, **kwargs)
        made.append(layout.sym.dtype)
        return layout

    monkeypatch.setattr(Layout, "lean_from_chunks", classmethod(recording))
    out = tmp_path / "ours"
    train(paths, out_dir=out, pre_tokenizer="whitespace", vocab_size=vocab_size)
    assert made == [dtype]
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train(paths, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False))
    (tmp_path / "hf").mkdir()
    hf.model.save(str(tmp_path / "hf"))
    ours = (out / "merges.txt").read_text(encoding="utf-8")
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    assert max(vocab.values()) == vocab_size - 1  # ids up to the edge were made
    assert ours == (tmp_path / "hf" / "merges.txt").read_text(encoding="utf-8")
