"""Truncation (`--max-length`, `--truncation`, `--stride`; `Tokenizer.enable_truncation`) against
HF's `enable_truncation(max_length, stride, direction)`: the kept window and HF's overflowing
windows (ids, offsets, type ids, word ids), room kept for the special tokens, empty lines, and
the settings HF refuses."""

from __future__ import annotations

import itertools

import polars as pl
import pytest

from tests.encode.conftest import PRESETS, hf_of
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus, small_scripts
from tokcolumnar import TokcolumnarError, Tokenizer
from tokcolumnar.encode import dataset

LINES = ["the pairs merge again and again, and the tokens merge too", "", "a",
         "Héllo 東京 wörld  tokens<|endoftext|>again [CLS] x y z", "one two"]
# (max_length, stride, direction): windows that overlap or not, from either side, a window of
# one token, and (bert) a max_length that leaves no room next to [CLS] and [SEP]
SETTINGS = [(6, 0, "right"), (6, 2, "left"), (7, 3, "right"), (5, 1, "left"), (3, 0, "left"),
            (2, 0, "right")]


@pytest.fixture(scope="module")
def trained(preset_tokenizers):
    return preset_tokenizers


def fields(e) -> tuple:
    return e.ids, e.offsets, e.type_ids, e.word_ids


def windows_of(e) -> list[tuple]:
    """An encoding and its overflowing ones, in HF's order."""
    return [fields(e)] + [fields(o) for o in e.overflowing]


@pytest.mark.parametrize("name,setting", list(itertools.product(PRESETS, SETTINGS)))
def test_encode_batch_windows_match_hf(trained, name, setting):
    max_length, stride, direction = setting
    tok, hf = Tokenizer.from_dir(trained[name]), hf_of(trained[name])
    for special in (True, False):
        room = max_length - (tok.num_special_tokens_to_add() if special else 0)
        if stride >= room > 0:
            continue  # HF refuses it (tested below)
        tok.enable_truncation(max_length, stride=stride, direction=direction)
        hf.enable_truncation(max_length, stride=stride, direction=direction)
        assert tok.truncation == hf.truncation
        ours = tok.encode_batch(LINES, add_special_tokens=special)
        theirs = hf.encode_batch(LINES, add_special_tokens=special)
        for line, a, b in zip(LINES, ours, theirs, strict=True):
            assert windows_of(a) == windows_of(b), (line, special)
        # the columnar methods keep the first window
        first = tok.encode_column(pl.Series(LINES), add_special_tokens=special).to_list()
        assert first == [e.ids for e in theirs]


def test_enable_truncation_refuses_what_hf_refuses(trained):
    tok = Tokenizer.from_dir(trained["bert"])
    with pytest.raises(TokcolumnarError, match="stride 3 must be less than max_length minus"):
        tok.enable_truncation(5, stride=3)  # HF: ValueError or a panic when encoding
    # HF silently does not truncate when max_length cannot hold [CLS] and [SEP]: refused here
    with pytest.raises(TokcolumnarError, match="smaller than the 2 special tokens"):
        tok.enable_truncation(1)
    with pytest.raises(TokcolumnarError, match="direction must be right or left"):
        tok.enable_truncation(8, direction="middle")
    assert tok.truncation is None
    tok.enable_truncation(8)
    with pytest.raises(TokcolumnarError, match="truncation of pairs"):
        tok.encode("a", "b")
    tok.no_truncation()
    assert tok.truncation is None


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_cli_stride_writes_every_window(tmp_path, trained, name):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    hf = hf_of(trained[name])
    for direction in ("right", "left"):
        out = tmp_path / f"{direction}.parquet"
        proc = run_cli("encode", str(src), "--tokenizer", str(trained[name]), "--out",
                       str(out), "--columns", "ids,offsets,type_ids,word_ids,n_tokens",
                       "--max-length", "6", "--stride", "2", "--truncation", direction,
                       "--quiet", "--force")
        assert proc.returncode == 0, proc.stderr
        df = pl.read_parquet(out)
        assert df.columns[:2] == ["text", "overflow_to_sample_mapping"]
        hf.enable_truncation(6, stride=2, direction=direction)
        want = []
        for k, e in enumerate(hf.encode_batch(LINES)):
            want += [(k, LINES[k], *w) for w in windows_of(e)]
        got = [(r["overflow_to_sample_mapping"], r["text"], r["ids"],
                [(o["start"], o["end"]) for o in r["offsets"]], r["type_ids"], r["word_ids"])
               for r in df.iter_rows(named=True)]
        assert got == want
        assert all(n <= 6 for n in df["n_tokens"])


def test_cli_stride_repeats_kept_columns_and_counts_windows_in_stats(tmp_path, trained):
    # every window of a row carries that row's kept columns; --stats counts the windows written
    src = tmp_path / "in.parquet"
    pl.DataFrame({"doc": [f"d{k}" for k in range(len(LINES))], "text": LINES}).write_parquet(src)
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--max-length", "6", "--stride", "2", "--keep-columns", "doc", "--stats",
                   "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    hf = hf_of(trained["bert"])
    hf.enable_truncation(6, stride=2)
    want = [(f"d{k}", LINES[k], w[0]) for k, e in enumerate(hf.encode_batch(LINES))
            for w in windows_of(e)]
    assert [(r["doc"], r["text"], r["ids"]) for r in df.iter_rows(named=True)] == want
    stats = pl.read_parquet(tmp_path / "o.stats.parquet")
    assert stats["rows"][0] == len(want)
    assert stats["tokens"][0] == sum(len(ids) for _, _, ids in want)


def test_pack_and_max_length_are_refused_together(tmp_path, trained):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["gpt2"]), "--out",
                   str(tmp_path / "o.parquet"), "--pack", "8", "--max-length", "4")
    assert_clean_error(proc, "--max-length does not go with --pack")


def test_cli_max_length_without_stride_keeps_one_row_per_line(tmp_path, trained):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--max-length", "4", "--truncation", "left", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["text", "ids", "n_tokens"]
    hf = hf_of(trained["bert"])
    hf.enable_truncation(4, direction="left")
    assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(LINES)]
    assert df["ids"][1].to_list() == [hf.token_to_id("[CLS]"), hf.token_to_id("[SEP]")]


@pytest.mark.parametrize("args,needle", [
    (["--max-length", "1"], "max_length 1 is smaller than the 2 special tokens"),
    (["--max-length", "5", "--stride", "3"], "stride 3 must be less than max_length minus"),
    (["--stride", "2"], "--stride needs --max-length"),
    (["--truncation", "left"], "--truncation needs --max-length"),
    (["--max-length", "0"], "max_length must be at least 1"),
    (["--max-length", "4", "--engine", "ray"], "--max-length is not available with --engine"),
])
def test_bad_truncation_settings_are_refused(tmp_path, trained, args, needle):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--quiet", *args)
    assert_clean_error(proc, needle)
    assert not out.exists()


def test_no_special_tokens_truncates_to_max_length(tmp_path, trained):
    """Without the special tokens the whole max_length is the text's (as HF)."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--max-length", "1", "--stride", "0", "--no-special-tokens", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    hf = hf_of(trained["bert"])
    hf.enable_truncation(1)
    want = [w[0] for e in hf.encode_batch(LINES, add_special_tokens=False)
            for w in windows_of(e)]
    assert df["ids"].to_list() == want


@pytest.mark.corpus
@pytest.mark.parametrize("file", small_scripts("udhr_multiscript.txt"))
def test_small_corpora_windows_match_hf(tmp_path, trained, file, monkeypatch):
    """Every line of a small corpus cut into overlapping windows from the left, in small
    batches: the rows are HF's windows in order, each with the index of its line."""
    monkeypatch.setattr(dataset, "BATCH_BYTES", 20_000)
    src = corpus(f"small/{file}")
    for name in ("bert", "gpt2"):
        out = tmp_path / f"{name}.parquet"
        dataset.encode_files(str(trained[name]), [str(src)], str(out), progress=False,
                             columns=["ids", "offsets"], max_length=16, stride=5,
                             truncation="left")
        df = pl.read_parquet(out)
        # each line once (every line gives at least one window), in order
        firsts = df.unique("overflow_to_sample_mapping", keep="first", maintain_order=True)
        assert firsts["overflow_to_sample_mapping"].to_list() == list(range(firsts.height))
        text = firsts["text"].to_list()
        hf = hf_of(trained[name])
        hf.enable_truncation(16, stride=5, direction="left")
        want_rows, want_ids, want_offsets = [], [], []
        for k, e in enumerate(hf.encode_batch(text)):
            for w in windows_of(e):
                want_rows.append(k)
                want_ids.append(w[0])
                want_offsets.append(w[1])
        assert df["overflow_to_sample_mapping"].to_list() == want_rows, name
        assert df["ids"].to_list() == want_ids, name
        got = [[(o["start"], o["end"]) for o in row] for row in df["offsets"].to_list()]
        assert got == want_offsets, name
