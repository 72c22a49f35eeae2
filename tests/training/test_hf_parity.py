"""Exactness against HuggingFace `tokenizers` on the real corpora: `merges.txt` identical to
`BpeTrainer` with the same settings, and HF loading our `tokenizer.json` encodes every line of
the file to the same ids as our encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from tests.support.corpora import corpus, small_scripts, small_tiered
from tokcolumnar import Tokenizer, train
from tokcolumnar.training import bpe
from tokcolumnar.training.bpe import QueueEntries

pytestmark = pytest.mark.corpus


def hf_train(path: Path, vocab_size: int, suffix: str | None = None):
    kw = {"end_of_word_suffix": suffix} if suffix else {}
    tok = HFTokenizer(models.BPE(**kw))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train([str(path)], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **kw))
    return tok


def hf_merges_txt(tok, tmp: Path) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(tmp))
    return (tmp / "merges.txt").read_text(encoding="utf-8")


def check_encoding(out: Path, path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    ours = Tokenizer.from_dir(out).encode_ids(lines).get_column("ids").to_list()
    theirs = [e.ids for e in HFTokenizer.from_file(str(out / "tokenizer.json")).encode_batch(
        lines)]
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert len(ours) == len(theirs) and not bad, f"line {bad[:1]} differs"


@pytest.mark.parametrize("name", small_tiered("en_botchan.txt"))
def test_small_corpus_identical_to_hf(name, tmp_path):
    path = corpus(f"small/{name}")
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=30000, pre_tokenizer="whitespace")
    hf = hf_train(path, 30000)
    assert (out / "merges.txt").read_text(encoding="utf-8") == hf_merges_txt(hf, tmp_path / "hf")
    assert json.loads((out / "vocab.json").read_text(encoding="utf-8")) == hf.get_vocab()
    check_encoding(out, path)


@pytest.mark.parametrize("name", small_scripts("en_botchan.txt"))
def test_small_corpus_with_suffix_identical_to_hf(name, tmp_path):
    """HF numbers the `x</w>` variants in hash order (so two HF runs can differ on ties); given
    the variant order of this HF run, our merges must be identical to it."""
    path = corpus(f"small/{name}")
    hf = hf_train(path, 30000, suffix="</w>")
    order = [t for t, _ in sorted(hf.get_vocab().items(), key=lambda kv: kv[1])]
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=30000, pre_tokenizer="whitespace",
          end_of_word_suffix="</w>", variant_order=order)
    assert (out / "merges.txt").read_text(encoding="utf-8") == hf_merges_txt(hf, tmp_path / "hf")
    check_encoding(out, path)


@pytest.mark.slow
def test_medium_en_identical_to_hf(tmp_path):
    path = corpus("medium/en.txt")
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=30000, pre_tokenizer="whitespace")
    hf = hf_train(path, 30000)
    assert (out / "merges.txt").read_text(encoding="utf-8") == hf_merges_txt(hf, tmp_path / "hf")
    check_encoding(out, path)


def test_compacted_queue_entries_identical_to_hf(tmp_path, monkeypatch):
    """en_botchan with the queue entries' positions compacted at every dead entry: compaction
    runs (and frees positions) and the merges stay HF's."""
    freed = []
    compact = QueueEntries.compact

    def counting_compact(self):
        before = sum(p.size for p in self.positions_of_base)
        compact(self)
        freed.append(before - sum(p.size for p in self.positions_of_base))

    monkeypatch.setattr(QueueEntries, "compact_share", 0)
    monkeypatch.setattr(QueueEntries, "compact", counting_compact)
    path = corpus("small/en_botchan.txt")
    out = tmp_path / "ours"
    # (a compaction per dead entry rewrites every base: at 10k tokens ~4-5 minutes of CI)
    train([str(path)], out_dir=out, vocab_size=4000, pre_tokenizer="whitespace")
    hf = hf_train(path, 4000)
    assert (out / "merges.txt").read_text(encoding="utf-8") == hf_merges_txt(hf, tmp_path / "hf")
    assert len(freed) > 1000 and sum(freed) > 0


@pytest.mark.parametrize("name", ["en_botchan.txt", "zh_hongloumeng_300k.txt"])
def test_swept_initial_base_identical_to_hf(name, tmp_path, monkeypatch):
    """The initial base swept of its stale positions whenever 5% of it was merged
    (`BpeTrainer._sweep`, on tables far below `SWEEP_MIN`): sweeps run and free positions,
    and the merges stay HF's (English words; Chinese runs, the long words it is made for)."""
    freed = []
    sweep = QueueEntries.sweep

    def counting_sweep(self, base, standing, sweepable):
        before = self.positions_of_base[base].size
        sweep(self, base, standing, sweepable)
        freed.append(before - self.positions_of_base[base].size)

    monkeypatch.setattr(bpe, "SWEEP_MIN", 0)
    monkeypatch.setattr(bpe, "SWEEP_SHARE", 0.05)
    monkeypatch.setattr(QueueEntries, "sweep", counting_sweep)
    path = corpus(f"small/{name}")
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=30000, pre_tokenizer="whitespace")
    hf = hf_train(path, 30000)
    assert (out / "merges.txt").read_text(encoding="utf-8") == hf_merges_txt(hf, tmp_path / "hf")
    assert len(freed) > 10 and sum(freed) > 0
