"""Inputs without blow-ups: long lines are cut where the pre-tokenizer says a cut cannot change
the words (checked against the uncut lines for every pre-tokenizer x normalizer), a line with no
such place is refused within a bound, in seconds and bounded memory; `-` is standard input,
named pipes are files, and inputs that cannot be read are named precisely."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import cli_env, command, error_line, run_measured
from tests.support.examples import examples
from tests.support.markers import ENGINES
from tokcolumnar import count_words
from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus import readers
from tokcolumnar.corpus.line_cuts import line_cut
from tokcolumnar.corpus.readers import iter_text_file
from tokcolumnar.corpus.sources import Source
from tokcolumnar.errors import TokcolumnarError

# Pre-tokenizers that cut long lines (the others read a line whole, up to the bound).
CUTTING = ["whitespace", "whitespace-split", "bert", "subword-nmt", "byte-level", "metaspace"]
NORMALIZERS = [("none", False), ("none", True), ("nfc", False), ("nfkc", True), ("nfd", False),
               ("nfkd", False), ("bert", False), ("bert", True)]
# Characters where normalizers and pre-tokenizers look at their neighbours: whitespace of every
# kind, combining marks (compose, reorder), Hangul jamo, sigma (final-sigma lowercase), dotted
# I, compatibility characters that decompose to a space + mark, CJK (BERT pads them with
# spaces), control and format characters (BERT drops them), GPT-2's contractions, Metaspace's
# replacement, the GPT-2 emulation's marker and its escape; CJK punctuation (cut points before
# a CJK letter) next to ideographs, kana, voiced-sound marks, the prolonged sound mark (a
# modifier letter) and fullwidth forms whose NFKC is case-ignorable.
TRICKY = (" \t\r\n\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u3000\u2028"
          "abxsS'.,-_1²①Σσςİß\u0301\u0308\u0345\u0327\u1100\u1161\u11a8ﬁ\xa8\u037a"
          "中文\u4dc0\u9fff、。，！；？：．かが\u3099\u309bカーｶ\x00\u200b\ufeff▁\ufdd0\ufdd1😀éA")


def words_table(inputs, pre: str, norm: str, lowercase: bool) -> pl.DataFrame | str:
    """The words table, or the error text when the input has no words (both must agree)."""
    try:
        return count_words(inputs, pre_tokenizer=pre, normalizer=norm, lowercase=lowercase)
    except TokcolumnarError as e:
        return str(e)


def lines_of(text: str) -> list[str]:
    """Lines split at "\\n" only, endings kept (what the reader makes a sequence)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def cut_everywhere(line: str, pattern: bytes) -> list[str]:
    """The line cut at every cut point of its pre-tokenizer."""
    data = line.encode()
    ends = [m.end() for m in re.finditer(pattern, data) if 0 < m.end() < len(data)]
    bounds = [0, *ends, len(data)]
    return [data[a:b].decode() for a, b in zip(bounds, bounds[1:]) if b > a]


SETTINGS = examples(1)


def pretokenizer_of(name: str):
    return TrainConfig(pre_tokenizer=name).text_components()[1]


@pytest.mark.parametrize("pre", CUTTING)
@SETTINGS
@given(text=st.text(alphabet=TRICKY, max_size=60), conf=st.sampled_from(NORMALIZERS))
def test_cutting_at_every_cut_point_keeps_the_words(pre, text, conf):
    """Each line cut at *every* cut point, the pieces given as separate sequences: the same
    words, counts and first-seen order as the whole lines, under every normalizer."""
    norm, lowercase = conf
    cut = line_cut(pretokenizer_of(pre))
    lines = lines_of(text)
    pieces = [p for line in lines for p in cut_everywhere(line, cut.pattern)]
    want = words_table(iter(lines), pre, norm, lowercase)
    got = words_table(iter(pieces), pre, norm, lowercase)
    assert got == want if isinstance(want, str) else got.equals(want), pieces


@pytest.mark.parametrize("pre", [*CUTTING, "digits", "none"])
@SETTINGS
@given(text=st.text(alphabet=TRICKY, max_size=80), conf=st.sampled_from(NORMALIZERS),
       chunk=st.integers(1, 9))
def test_reader_with_tiny_chunks_keeps_the_words(pre, text, conf, chunk):
    """The reader with chunks of a few bytes (so most lines are longer than a chunk and get
    cut): it loses no byte, cuts only at line ends and cut points, and the words table is the
    one of the whole lines."""
    norm, lowercase = conf
    pretokenizer = pretokenizer_of(pre)
    cut = line_cut(pretokenizer)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.txt"
        f.write_bytes(text.encode())
        chunks = list(iter_text_file(Source(f, "text", None), pretokenizer, 1000, chunk))
        assert "".join(chunks) == text
        data = text.encode()
        allowed = {m.end() for m in re.finditer(b"\n", data)}
        if cut is not None:
            allowed |= {m.end() for m in re.finditer(cut.pattern, data)}
        pos = 0
        for c in chunks[:-1]:
            pos += len(c.encode())
            assert pos in allowed, (chunks, pos)
        with mock.patch.object(readers, "CHUNK_BYTES", chunk):
            got = words_table([str(f)], pre, norm, lowercase)
    want = words_table(iter(lines_of(text)), pre, norm, lowercase)
    assert got == want if isinstance(want, str) else got.equals(want)


def test_reader_bound_is_exact_and_chunk_independent(tmp_path):
    """A piece of exactly 4 x --max-word-chars bytes up to its cut point is read, one more
    byte is refused, whatever the chunk size."""
    pretokenizer = pretokenizer_of("whitespace-split")
    ok, bad = tmp_path / "ok.txt", tmp_path / "bad.txt"
    ok.write_bytes(b"a b\n" + b"x" * 39 + b" y z\n")  # "xxx...x " is 40 bytes
    bad.write_bytes(b"a b\n" + b"x" * 40 + b" y z\n")
    for chunk in (1, 3, 7, 40, 41, 64):
        assert "".join(iter_text_file(Source(ok, "text", None), pretokenizer, 10, chunk)) == (
            ok.read_text())
        if chunk > 40:  # the bound is never below a chunk
            continue
        with pytest.raises(TokcolumnarError, match=r"bad.txt, byte 4: a line runs more than 40 "
                                                   "bytes without a place"):
            list(iter_text_file(Source(bad, "text", None), pretokenizer, 10, chunk))


# -- the CLI: long lines, /dev/zero, standard input, pipes ------------------------------------
@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory) -> Callable[[str], float]:
    """Peak RSS of counting a one-line file with an engine: what the process needs whatever
    the input (measured once per engine, when a test first asks)."""
    f = tmp_path_factory.mktemp("base") / "small.txt"
    f.write_text("a small file\n", encoding="utf-8")
    out = f.parent / "w.parquet"
    rss: dict[str, float] = {}

    def of(engine: str) -> float:
        if engine not in rss:
            rc, err, rss[engine], _ = run_measured(["count", str(f), "--out", str(out),
                                                    "--quiet", "--engine", engine])
            assert rc == 0, err
        return rss[engine]

    return of


@pytest.mark.slow
@pytest.mark.parametrize("pre", ["whitespace", "byte-level", "metaspace"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_long_line_of_words_is_read_in_bounded_memory(tmp_path, pre, engine):
    """A 25 MB line of words (6 x the bound) is counted, with the right words, in seconds and
    in about the memory the same words take in short lines (the line is read in pieces)."""
    vocab = ["w" + "".join(chr(97 + i // 26 ** k % 26) for k in range(3)) for i in range(5000)]
    words = [vocab[i % 5000] for i in range(5_000_000)]
    one_line, short_lines = tmp_path / "line.txt", tmp_path / "lines.txt"
    one_line.write_text(" ".join(words), encoding="utf-8")
    short_lines.write_text("\n".join(" ".join(words[i:i + 12])
                                     for i in range(0, len(words), 12)), encoding="utf-8")
    assert one_line.stat().st_size > 6 * 4_000_000
    out = tmp_path / "w.parquet"
    rss = {}
    for f in (short_lines, one_line):  # the long line last: its words stay in `out`
        rc, err, rss[f.name], seconds = run_measured(["count", str(f), "--out", str(out),
                                                      "--quiet", "--pre-tokenizer", pre,
                                                      "--engine", engine])
        assert rc == 0, err
        assert seconds < 60
    assert rss["line.txt"] < 1.25 * rss["lines.txt"] + 30, rss
    got = pl.read_parquet(out)
    if pre == "whitespace":
        want = Counter(words)
    else:  # one piece per word, all but the first with the space in front
        space = "Ġ" if pre == "byte-level" else "▁"
        want = Counter([("▁" if pre == "metaspace" else "") + words[0]]
                       + [space + w for w in words[1:]])
    assert dict(zip(got["word"], got["count"])) == want


@pytest.mark.parametrize("pre, needle", [
    ("whitespace", "standard input, byte 0: a line runs more than 4,000,000 bytes without a "
                   "place where the pre-tokenizer can cut it exactly (it cuts after an ASCII "
                   "space, tab or carriage return, or after CJK punctuation"),
    ("byte-level", "it cuts before an ASCII space that follows a printable ASCII character"),
    ("digits", "it cuts only at line ends"),
    ("none", "standard input, byte 0: a line of more than 4,000,000 bytes: a pre-token of more "
             "than 1,000,000 characters exceeds --max-word-chars 1,000,000"),
])
@pytest.mark.parametrize("engine", ENGINES)
def test_dev_zero_on_stdin_is_refused_quickly(tmp_path, baseline_rss, pre, needle, engine):
    """NUL bytes for ever (no line end, no cut point): refused once the bound is passed, in
    seconds, in bounded memory."""
    rc, err, rss, seconds = run_measured(
        ["count", "-", "--out", str(tmp_path / "w.parquet"), "--pre-tokenizer", pre,
         "--engine", engine], stdin_file="/dev/zero", timeout=60)
    assert rc == 2, err
    assert needle in error_line(err)
    assert seconds < 20
    assert rss < baseline_rss(engine) + 150, (rss, baseline_rss(engine))
    assert not (tmp_path / "w.parquet").exists()


def test_a_long_line_within_a_raised_bound_is_read(tmp_path):
    """--max-word-chars raises the bound: a 5 MB line without a cut point passes with 2M."""
    f = tmp_path / "t.txt"
    f.write_bytes(b"ab" * 2_500_000)
    out = tmp_path / "w.parquet"
    rc, err, _, _ = run_measured(["count", str(f), "--out", str(out), "--quiet",
                                  "--pre-tokenizer", "digits"])
    assert rc == 2 and "a line runs more than 4,000,000 bytes" in error_line(err)
    rc, err, _, _ = run_measured(["count", str(f), "--out", str(out), "--quiet",
                                  "--pre-tokenizer", "digits", "--max-word-chars", "6000000"])
    assert rc == 0, err
    assert pl.read_parquet(out).rows() == [("ab" * 2_500_000, 1, 0)]


TEXT = "The cat sat.\nThe dog, the cat!\r\n\nnaïve café 東京\n"
WANT = {"The": 2, "cat": 2, "sat": 1, ".": 1, "dog": 1, ",": 1, "the": 1, "!": 1, "naïve": 1,
        "café": 1, "東京": 1}


def counted(out: Path) -> dict[str, int]:
    df = pl.read_parquet(out)
    return dict(zip(df["word"], df["count"]))


@pytest.mark.parametrize("engine", ENGINES)
def test_dash_reads_standard_input(tmp_path, engine):
    out = tmp_path / "w.parquet"
    rc, err, _, _ = run_measured(["count", "-", "--out", str(out), "--quiet", "--engine", engine],
                                 stdin_data=TEXT.encode())
    assert rc == 0, err
    assert counted(out) == WANT
    # --format applies to standard input; a file literally named "-" is ./-
    rows = "".join(json.dumps({"text": x}) + "\n" for x in lines_of(TEXT)).encode()
    rc, err, _, _ = run_measured(["count", "-", "--format", "jsonl", "--out", str(out),
                                  "--quiet", "--engine", engine], stdin_data=rows)
    assert rc == 0, err
    assert counted(out) == WANT
    (tmp_path / "-").write_text("only this file\n", encoding="utf-8")
    rc, err, _, _ = run_measured(["count", str(tmp_path / "-"), "--out", str(out), "--quiet",
                                  "--engine", engine], stdin_data=TEXT.encode())
    assert rc == 0, err
    assert counted(out) == {"only": 1, "this": 1, "file": 1}


def test_training_from_stdin_records_it(tmp_path):
    """`train -` works and run.json names standard input (no file fingerprint to take)."""
    out = tmp_path / "o"
    rc, err, _, _ = run_measured(["train", "-", "--out", str(out), "--vocab-size", "40",
                                  "--quiet"], stdin_data=TEXT.encode())
    assert rc == 0, err
    assert json.loads((out / "run.json").read_text())["inputs"] == [{"path": "standard input"}]


def test_dash_twice_and_parquet_on_stdin_are_refused(tmp_path):
    out = str(tmp_path / "w.parquet")
    rc, err, _, _ = run_measured(["count", "-", "-", "--out", out], stdin_data=b"a b\n")
    assert rc == 2 and "standard input (-) is given more than once" in error_line(err)
    rc, err, _, _ = run_measured(["count", "-", "--format", "parquet", "--out", out],
                                 stdin_data=b"PAR1")
    assert rc == 2
    assert "standard input: Parquet needs a seekable file" in error_line(err)


class Fifo:
    """A named pipe fed by a thread (unblocked at the end if the reader never opened it)."""

    def __init__(self, path: Path, data: bytes):
        self.path = path
        os.mkfifo(path)
        self.thread = threading.Thread(target=self._write, args=(data,), daemon=True)
        self.thread.start()

    def _write(self, data: bytes) -> None:
        try:
            with open(self.path, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass

    def close(self) -> None:
        if self.thread.is_alive():  # the writer waits for a reader: open and drop it
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(5)
            os.close(fd)
        self.thread.join(5)


@pytest.mark.parametrize("engine", ENGINES)
def test_named_pipes_are_read_as_files(tmp_path, engine):
    """A FIFO (as from `<(cmd)`) is read front to back, its name giving the format and the
    compression as for a file; Parquet through a pipe is refused clearly."""
    zst = pa.BufferOutputStream()
    with pa.CompressedOutputStream(zst, "zstd") as z:
        z.write("".join(json.dumps({"text": x}) + "\n" for x in lines_of(TEXT)).encode())
    cases = [("a.txt", TEXT.encode()), ("b.txt.gz", gzip.compress(TEXT.encode())),
             ("c.jsonl.zst", zst.getvalue().to_pybytes())]
    out = tmp_path / "w.parquet"
    for name, data in cases:
        fifo = Fifo(tmp_path / name, data)
        rc, err, _, _ = run_measured(["count", str(fifo.path), "--out", str(out), "--quiet",
                                      "--engine", engine])
        fifo.close()
        assert rc == 0, (name, err)
        assert counted(out) == WANT, name
    fifo = Fifo(tmp_path / "d.parquet", b"PAR1")
    rc, err, _, _ = run_measured(["count", str(fifo.path), "--out", str(out), "--engine",
                                  engine])
    fifo.close()
    assert rc == 2
    assert f"{fifo.path}: Parquet needs a seekable file, not a pipe" in error_line(err)


def test_process_substitution(tmp_path):
    """`tokcolumnar count <(cmd)` through a shell: /dev/fd/N is a pipe."""
    if not shutil.which("bash"):
        pytest.skip("no bash")
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "w.parquet"
    cmd = " ".join(command("count", f"<(cat {src})", "--out", str(out),
                           "--quiet"))
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert counted(out) == WANT


def test_inputs_that_cannot_be_read_are_named(tmp_path):
    out = str(tmp_path / "w.parquet")

    def error(*inputs: str) -> str:
        rc, err, _, _ = run_measured(["count", *inputs, "--out", out], timeout=60)
        assert rc == 2
        return error_line(err)

    assert f"input not found: {tmp_path / 'nope.txt'}" in error(str(tmp_path / "nope.txt"))
    (tmp_path / "link.txt").symlink_to(tmp_path / "gone.txt")
    assert "(a broken symbolic link)" in error(str(tmp_path / "link.txt"))
    assert "input /dev/zero is a character device, not a file or a pipe" in error("/dev/zero")
    assert "input /dev/null is a character device" in error("/dev/null")
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # a short path for the socket
        sock_path = os.path.join(d, "s.sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(sock_path)
        try:
            assert f"input {sock_path} is a socket, not a file or a pipe" in error(sock_path)
        finally:
            sock.close()
    assert not Path(out).exists()


def test_unreadable_inputs_are_named(tmp_path):
    """Permission denied on a file and on a directory (run without the capabilities that let
    root read anything)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None and os.geteuid() == 0:
        pytest.skip("running as root without setpriv: every file is readable")
    f = tmp_path / "secret.txt"
    f.write_text("hidden words\n", encoding="utf-8")
    f.chmod(0)
    d = tmp_path / "closed"
    d.mkdir()
    (d / "x.txt").write_text("a\n", encoding="utf-8")
    d.chmod(0)
    tmp_path.chmod(0o777)
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search",
              "--inh-caps=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    try:
        for path, needle in ((f, f"cannot read input {f}: permission denied"),
                             (d, f"cannot read directory {d}: permission denied"),
                             (d / "x.txt", f"cannot access input {d / 'x.txt'}: permission "
                                           "denied")):
            proc = subprocess.run([*prefix, *command("count", str(path), "--out",
                                                     str(tmp_path / "w.parquet"))],
                                  capture_output=True, text=True, env=cli_env(), timeout=120)
            assert proc.returncode == 2, proc.stderr
            assert needle in error_line(proc.stderr)
    finally:
        d.chmod(0o755)
        f.chmod(0o644)


def test_parquet_strings_are_checked_and_dictionary_columns_read(tmp_path):
    """Invalid UTF-8 in a Parquet string column is refused (it used to vanish from the words);
    a dictionary-encoded string column is read as its strings."""
    values = pa.array([b"ok word", b"bad \xff here"], pa.binary())
    bad = pa.Array.from_buffers(pa.string(), 2, values.buffers())
    pq.write_table(pa.table({"text": bad}), tmp_path / "bad.parquet")
    with pytest.raises(TokcolumnarError, match="bad.parquet: invalid UTF-8 in the text column"):
        count_words(str(tmp_path / "bad.parquet"))
    pq.write_table(pa.table({"text": pa.array(["a b", "c", "a b"]).dictionary_encode()}),
                   tmp_path / "dict.parquet")
    w = count_words(str(tmp_path / "dict.parquet"))
    assert w.rows() == [("a", 2, 0), ("b", 2, 1), ("c", 1, 2)]


def test_a_huge_jsonl_or_csv_row_is_refused_clearly(tmp_path):
    """A 10 MB JSONL / CSV value (more than two of Arrow's blocks of 4 x --max-word-chars
    bytes): one clear line, quickly; a 3 MB one is read."""
    out = str(tmp_path / "w.parquet")
    for size, ok in ((3_000_000, True), (10_000_000, False)):
        value = "word " * (size // 5)
        (tmp_path / "t.jsonl").write_text(json.dumps({"text": value}) + "\n", encoding="utf-8")
        (tmp_path / "t.csv").write_text(f'text\n"{value}"\n', encoding="utf-8")
        for name in ("t.jsonl", "t.csv"):
            rc, err, _, seconds = run_measured(["count", str(tmp_path / name), "--out", out,
                                                "--quiet"])
            assert seconds < 30
            if ok:
                assert rc == 0, err
                assert counted(Path(out)) == {"word": size // 5}
            else:
                assert rc == 2
                line = error_line(err)
                assert f"cannot read {tmp_path / name} as " in line
                assert "a row of more than 4,000,000 bytes" in line


def test_python_api_reads_the_same_bounded_way(tmp_path):
    """`count_words` from Python: the bound follows max_word_chars; within it, the
    --max-word-chars check gives the pre-token's length."""
    f = tmp_path / "t.txt"
    f.write_bytes(b"x" * 5_000_000)
    with pytest.raises(TokcolumnarError, match="a line runs more than 4,000,000 bytes"):
        count_words(str(f))
    with pytest.raises(TokcolumnarError, match="a pre-token of 5,000,000 characters exceeds "
                                               "--max-word-chars 2,000,000"):
        count_words(str(f), max_word_chars=2_000_000)


@examples(2)
@given(text=st.text(alphabet="ab\n\r\u2028 é", min_size=1, max_size=40))
def test_small_chunks_are_cut_into_the_lines_polars_cuts(text):
    """A small chunk's lines cut in Python (`lines_of`) are Polars' inclusive split's."""
    expected = pl.Series("text", [text], dtype=pl.String).str.split("\n", inclusive=True)
    assert readers.lines_of(text) == expected.explode().to_list()


@pytest.mark.parametrize("size", [10, readers.SPLIT_IN_PYTHON_CHARS + 10])
def test_a_file_reads_as_the_same_lines_whatever_its_size(tmp_path, size):
    """Lines of a small file (cut in Python) and of a larger one (cut by Polars) alike: line
    endings kept, \\r and U+2028 inside lines, the last line without its newline."""
    line = "ab\r c\u2028d\n\n"
    text = (line * (size // len(line) + 1))[:size].rstrip("\n") + "\nlast"
    path = tmp_path / "a.txt"
    path.write_text(text, encoding="utf-8", newline="")
    pre = TrainConfig(pre_tokenizer="byte-level").text_components()[1]
    got = pl.concat(list(readers.iter_source(Source(path, "text", None), "text", pre)))
    parts = text.split("\n")
    assert got.to_list() == [p + "\n" for p in parts[:-1]] + [parts[-1]]
