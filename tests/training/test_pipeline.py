"""The training pipeline's own pieces (`tokcolumnar.training.pipeline`)."""

from __future__ import annotations

import pytest

from tests.support.corpora import corpus
from tokcolumnar import train
from tokcolumnar.training import pipeline
from tokcolumnar.training.checkpoint import CHECKPOINT
from tokcolumnar.workdir import WorkDir


def test_background_write_raises_its_error_on_wait():
    def fail() -> None:
        raise OSError("no space left")

    saving = pipeline.BackgroundWrite(fail)
    with pytest.raises(OSError, match="no space left"):
        saving.wait()


@pytest.mark.corpus
def test_failed_save_of_the_counted_words_fails_the_run(tmp_path, monkeypatch):
    """The counted words are saved in a thread: its error still ends the run (before the
    merge loop's first pass, as when the save ran in line)."""
    def fail(self, name, df):
        raise OSError(f"cannot write {name}")

    monkeypatch.setattr(WorkDir, "write_parquet", fail)
    with pytest.raises(OSError, match="cannot write words.parquet"):
        train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "out", vocab_size=400)
    assert not (tmp_path / "out").exists()


@pytest.mark.corpus
def test_counted_words_saved_before_the_first_pass(tmp_path, monkeypatch):
    """The merge loop's first checkpoint (or kill point) finds the counted words in the work
    directory."""
    seen = []
    real = pipeline.MergeCheckpoint.due

    def due(self):
        result = real(self)
        seen.append((self.work.file(pipeline.COUNTED_WORDS)).is_file())
        return result

    monkeypatch.setattr(pipeline.MergeCheckpoint, "due", due)
    train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "out", vocab_size=400)
    assert seen and all(seen)


@pytest.mark.corpus
def test_checkpoints_only_where_a_run_can_resume(tmp_path, monkeypatch):
    """The loop's checkpoints go to a work directory that was given (or the output's): a
    run without one works in a temporary directory, which nothing can resume from, and
    writes none there, even when asked to checkpoint every pass."""
    written = []
    real = WorkDir.write_pickle

    def write_pickle(self, name, obj):
        written.append(name)
        return real(self, name, obj)

    monkeypatch.setattr(WorkDir, "write_pickle", write_pickle)
    text = str(corpus("small/en_botchan.txt"))
    bare = train(text, vocab_size=400, checkpoint_every=0, show_progress=False)
    assert written == []
    kept = train(text, work_dir=tmp_path / "work", vocab_size=400, checkpoint_every=0,
                 show_progress=False)
    assert CHECKPOINT in written
    assert kept.merges.equals(bare.merges)
