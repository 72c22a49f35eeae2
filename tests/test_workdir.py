"""The work directory's fingerprint in two steps (`workdir.WorkDir`): the marker holds the
inputs' sizes and mtimes at once, and their head hashes from the first file a resume could
take up; a resume compares what the marker holds."""

from __future__ import annotations

import functools
import hashlib
import json
import os

import pytest

from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus.sources import expand_inputs, run_scope
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.workdir import MARKER, WorkDir, run_fingerprint


def open_work(tmp_path, sources, resume, cfg=None):
    cfg = cfg or TrainConfig(vocab_size=300)
    return WorkDir.open(tmp_path / "w", inputs=[], resume=resume,
                        fingerprint=run_fingerprint(cfg, sources, heads=False),
                        complete=functools.partial(run_fingerprint, cfg, sources))


def marker_inputs(tmp_path):
    return json.loads((tmp_path / "w" / MARKER).read_text())["fingerprint"]["inputs"]


@pytest.fixture
def corpus_dir(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(20):
        (d / f"f{i:02d}.txt").write_text(f"words of file {i}\n" * (i + 1))
    return d


def test_heads_reach_the_marker_before_the_first_saved_file(tmp_path, corpus_dir):
    sources = expand_inputs([str(corpus_dir)])
    with run_scope():
        work = open_work(tmp_path, sources, resume=False)
        # the marker at once: every input's size and mtime as listed
        assert [(x["path"], x["size"], x["mtime_ns"]) for x in marker_inputs(tmp_path)] == [
            (str(s.path), *s.listed) for s in sources]
        work.write_json("count.json", {"done": 1})
        heads = [x["head_sha256"] for x in marker_inputs(tmp_path)]
        assert heads == [hashlib.sha256(s.path.read_bytes()).hexdigest() for s in sources]
    # a resume with the same inputs continues
    assert open_work(tmp_path, expand_inputs([str(corpus_dir)]), resume=True).resumed


def test_a_changed_first_block_refuses_once_heads_are_saved(tmp_path, corpus_dir):
    sources = expand_inputs([str(corpus_dir)])
    open_work(tmp_path, sources, resume=False).write_json("count.json", {"done": 1})
    f = corpus_dir / "f03.txt"
    st = f.stat()
    f.write_bytes(f.read_bytes().replace(b"words", b"WORDS"))  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    with pytest.raises(TokcolumnarError, match=r"input .*f03\.txt changed \(first block\)"):
        open_work(tmp_path, expand_inputs([str(corpus_dir)]), resume=True)


def test_a_run_killed_before_saving_resumes_by_starting_again(tmp_path, corpus_dir):
    """A marker without head hashes (nothing saved): --resume compares sizes, mtimes and
    options (a change refuses) and, when they match, starts again in a cleared directory."""
    sources = expand_inputs([str(corpus_dir)])
    open_work(tmp_path, sources, resume=False)
    (tmp_path / "w" / "runs").mkdir()  # a killed spill's leftovers
    assert not any("head_sha256" in x for x in marker_inputs(tmp_path))
    with pytest.raises(TokcolumnarError, match="option --vocab-size changed"):
        open_work(tmp_path, sources, resume=True, cfg=TrainConfig(vocab_size=400))
    again = open_work(tmp_path, expand_inputs([str(corpus_dir)]), resume=True)
    assert not again.resumed and not (tmp_path / "w" / "runs").exists()
    with open(corpus_dir / "f05.txt", "a") as f:
        f.write("more\n")
    with pytest.raises(TokcolumnarError, match=r"f05\.txt changed \(size\)"):
        open_work(tmp_path, expand_inputs([str(corpus_dir)]), resume=True)
