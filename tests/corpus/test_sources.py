"""Inputs named by URIs (`corpus.sources`): a `file://` URI — read through the Arrow
filesystem, as `s3://`, `gs://` and `hdfs://` are — gives the words and token ids of its local
path, whole or cut into units; directories and `*` / `**` globs expand as local ones; a URI
that Arrow cannot open is one error line. Local directories list as pathlib's `rglob` finds
their files, and a run scope lists and fingerprints its inputs once."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from urllib.parse import quote

import polars as pl
import pytest

from tests.support.cli import error_line, run_cli
from tests.support.corpora import corpus
from tokcolumnar import count_words
from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus.sources import (
    expand_inputs,
    file_digests,
    file_stat,
    filesystem_of,
    run_scope,
)
from tokcolumnar.corpus.units import count_units, plan_units
from tokcolumnar.workdir import input_fingerprint

#: Bytes of the corpus each test file holds (several units of `UNIT`).
CORPUS_BYTES = 120_000
UNIT = 20_000


def uri(path: Path) -> str:
    """The file:// URI of a local path, percent-encoded as a URI must be."""
    return "file://" + quote(str(path.resolve()))


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """The same lines of a real multi-script corpus as text, gzipped text, Parquet (many row
    groups) and JSONL, in a directory whose name needs percent-encoding."""
    data = corpus("small/udhr_multiscript.txt").read_bytes()[:CORPUS_BYTES]
    text = data[: data.rindex(b"\n") + 1].decode()
    lines = text.splitlines(keepends=True)
    folder = tmp_path / "a dir é"
    folder.mkdir()
    files = {"text": folder / "c.txt", "gzip": folder / "c.txt.gz",
             "parquet": folder / "c.parquet", "jsonl": folder / "c.jsonl"}
    files["text"].write_text(text, encoding="utf-8")
    files["gzip"].write_bytes(gzip.compress(text.encode()))
    pl.DataFrame({"text": lines}).write_parquet(files["parquet"], row_group_size=100)
    files["jsonl"].write_text("".join(json.dumps({"text": x}) + "\n" for x in lines),
                              encoding="utf-8")
    return files


@pytest.mark.corpus
@pytest.mark.parametrize("kind", ["text", "gzip", "parquet", "jsonl"])
def test_a_file_uri_counts_as_its_local_path(inputs, kind):
    path = inputs[kind]
    expected = count_words(str(path), show_progress=False)
    assert expected.height > 1000
    assert count_words(uri(path), show_progress=False).equals(expected)
    # cut into units (as Ray and Spark workers read it): byte ranges and row groups read
    # through the filesystem give the same words, first_seen included
    units = plan_units([uri(path)], unit_bytes=UNIT)
    assert len(units) == (1 if kind == "gzip" else len(plan_units([str(path)],
                                                                  unit_bytes=UNIT)))
    if kind != "gzip":
        assert len(units) > 3
    assert all(s.uri is not None for u in units for s in u.sources)
    assert count_units(units, TrainConfig(show_progress=False)).equals(expected)


@pytest.mark.corpus
def test_a_bounded_count_reads_uris(inputs, tmp_path):
    # with a work directory (the CLI's default): units, spilled runs and the fingerprint
    paths = [inputs["text"], inputs["parquet"]]
    expected = count_words([str(p) for p in paths], show_progress=False)
    got = count_words([uri(p) for p in paths], work_dir=tmp_path / "w", memory_limit=60_000,
                      show_progress=False)
    assert got.equals(expected)


def test_uri_directories_and_globs_expand_as_local_paths(tmp_path):
    root = tmp_path / "in put"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".git").mkdir()
    for name in ("b.txt", "a.txt", "x.jsonl", ".hidden.txt", "sub/c.txt", "sub/deeper/d.txt",
                 "sub/e.jsonl", ".git/f.txt", "sub/.g.txt"):
        (root / name).write_text("a b\n")

    def local(pattern: str) -> list[str]:
        return [uri(Path(s.label)) for s in expand_inputs([str(root) + pattern])]

    def remote(pattern: str) -> list[str]:
        return [s.label for s in expand_inputs([uri(root) + pattern])]

    for pattern in ("", "/*.txt", "/**/*.txt", "/sub/*", "/**", "/*/*.txt", "/.*", "/.git/*"):
        assert remote(pattern) == local(pattern), pattern
    assert remote("/**/*.txt")[-1].endswith("/in%20put/sub/deeper/d.txt")
    # a query (S3's ?region=...) stays on every file's URI
    assert remote("/**/*.txt?x=1") == [x + "?x=1" for x in remote("/**/*.txt")]
    # formats from the extensions, as for local files
    fmts = {s.label.rsplit("/", 1)[1]: s.fmt for s in expand_inputs([uri(root) + "/**"])}
    assert fmts["x.jsonl"] == "jsonl" and fmts["a.txt"] == "text"


def test_a_fingerprint_of_a_uri_is_its_local_files(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("some text\n" * 1000)
    [local] = input_fingerprint([path])
    [remote] = input_fingerprint(expand_inputs([uri(path)]))
    assert remote["path"] == uri(path)
    assert {k: v for k, v in remote.items() if k != "path"} == \
        {k: v for k, v in local.items() if k != "path"}


@pytest.mark.corpus
def test_train_and_encode_read_uris_as_local_paths(inputs, tmp_path):
    path = inputs["text"]
    outs = {}
    for name, arg in (("local", str(path)), ("uri", uri(path))):
        tr = run_cli("train", arg, "--out", str(tmp_path / name), "--vocab-size", "2500",
                     "--quiet")
        assert tr.returncode == 0, tr.stderr
        enc = run_cli("encode", arg, "--tokenizer", str(tmp_path / "local"), "--out",
                      str(tmp_path / f"{name}.parquet"), "--quiet")
        assert enc.returncode == 0, enc.stderr
        outs[name] = ((tmp_path / name / "tokenizer.json").read_text(),
                      pl.read_parquet(tmp_path / f"{name}.parquet"))
    assert outs["uri"][0] == outs["local"][0]
    assert outs["uri"][1].equals(outs["local"][1]) and outs["local"][1].height > 100


def test_a_uri_arrow_cannot_open_is_one_error_line(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("a b\n")
    out = str(tmp_path / "w.parquet")
    cases = {"nosuch://host/a.txt": "cannot open nosuch://host/a.txt: Unrecognized filesystem "
                                    "type in URI: nosuch://host/a.txt",
             uri(tmp_path / "missing.txt"): f"input not found: {uri(tmp_path / 'missing.txt')}",
             uri(tmp_path) + "/*.csv": f"no files match {uri(tmp_path)}/*.csv"}
    for arg, message in cases.items():
        proc = run_cli("count", arg, "--out", out)
        assert proc.returncode == 2
        assert error_line(proc.stderr) == f"tokcolumnar: error: {message}"
    assert not Path(out).exists()


def test_an_output_named_as_an_input_uri_is_refused(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("a b\n")
    proc = run_cli("encode", uri(src), "--tokenizer", str(tmp_path / "tok"), "--out", str(src))
    assert proc.returncode == 2
    assert error_line(proc.stderr) == f"tokcolumnar: error: --out {src} is an input"
    assert src.read_text() == "a b\n"


def test_the_uris_of_a_bucket_share_one_filesystem():
    # made once per root and process (an S3 filesystem may ask for the bucket's region);
    # the paths are those Arrow gives each URI (no network: the region is given)
    pafs = pytest.importorskip("pyarrow.fs")
    if not getattr(pafs, "S3FileSystem", None):
        pytest.skip("pyarrow without S3")
    a = "s3://bucket/dir/a%20b.txt?region=us-east-1"
    b = "s3://bucket/c/d.parquet?region=us-east-1"
    (fs_a, path_a), (fs_b, path_b) = filesystem_of(a), filesystem_of(b)
    assert fs_a is fs_b and isinstance(fs_a, pafs.S3FileSystem)
    assert (path_a, path_b) == (pafs.FileSystem.from_uri(a)[1], pafs.FileSystem.from_uri(b)[1])
    assert path_a == "bucket/dir/a b.txt"
    assert filesystem_of("file:///tmp/x%20y/z.txt")[1] == "/tmp/x y/z.txt"


# -- local listings, digests and the run scope -------------------------------------------------
def test_a_directory_lists_its_files_as_rglob_finds_them(tmp_path):
    """The walk (`walk_files`, one `os.scandir` per directory) gives the files pathlib's
    `rglob` gives, in Path order (component by component: `a/x` before `a-b/y`, which a
    string sort puts after), hidden directories walked, hidden files, directory links and
    broken links left out; each source keeps its listed size and mtime."""
    d = tmp_path / "in"
    for rel, text in [("a/x.txt", "x"), ("a-b/y.txt", "yy"), ("a.txt", "top"),
                      ("sub/deep/z.jsonl", '{"text": "z"}\n'), (".hid/h.txt", "h"),
                      (".hidden.txt", "no"), ("sub/.dot", "no"), ("e.txt", "")]:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    (d / "empty_dir").mkdir()
    (d / "link.txt").symlink_to(d / "a.txt")
    (d / "dirlink").symlink_to(d / "sub", target_is_directory=True)
    (d / "broken.txt").symlink_to(d / "nowhere")
    expected = sorted(q for q in d.rglob("*") if q.is_file() and not q.name.startswith("."))
    sources = expand_inputs([str(d)])
    assert [s.path for s in sources] == expected
    assert [s.path.relative_to(d).as_posix() for s in sources] == [
        ".hid/h.txt", "a/x.txt", "a-b/y.txt", "a.txt", "e.txt", "link.txt",
        "sub/deep/z.jsonl"]
    assert [s.fmt for s in sources][-1] == "jsonl"
    for s in sources:
        st = os.stat(s.path)
        assert s.listed == (st.st_size, st.st_mtime_ns)
        assert file_stat(s) == s.listed


def test_file_digests_hash_the_first_and_last_mib(tmp_path):
    """`file_digests`: SHA-256 of the first MiB (the work directory's fingerprint), BLAKE2b of
    the first MiB and, past 2 MiB, the last one (`run.json`), as hashlib computes them over
    the file's bytes."""
    big = bytes(range(256)) * (10 * 1024 + 7)  # ~2.5 MiB
    for name, data in [("empty.txt", b""), ("small.txt", b"one two\n"), ("big.txt", big)]:
        path = tmp_path / name
        path.write_bytes(data)
        [src] = expand_inputs([str(path)])
        digests = file_digests(src)
        head = data[: 1 << 20]
        both = hashlib.blake2b(digest_size=16)
        both.update(head)
        if len(data) > 2 << 20:
            both.update(data[-(1 << 20):])
        assert (digests.size, digests.head_sha256, digests.head_tail_blake2b) == (
            len(data), hashlib.sha256(head).hexdigest(), both.hexdigest())


def test_a_run_scope_lists_and_reads_each_input_once(tmp_path):
    """Within `run_scope`, the same inputs are listed once and each file's digests read once
    (the files as first seen); outside it, every call looks again."""
    (tmp_path / "a.txt").write_text("one\n")
    with run_scope():
        first = expand_inputs([str(tmp_path)])
        before = file_digests(first[0])
        (tmp_path / "b.txt").write_text("two\n")
        (tmp_path / "a.txt").write_text("changed\n")
        assert expand_inputs([str(tmp_path)]) == first
        assert file_digests(expand_inputs([str(tmp_path)])[0]) == before
    now = expand_inputs([str(tmp_path)])
    assert [s.path.name for s in now] == ["a.txt", "b.txt"]
    assert file_digests(now[0]).head_sha256 == hashlib.sha256(b"changed\n").hexdigest()
