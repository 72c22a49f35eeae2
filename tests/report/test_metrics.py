"""The report's metrics against a plain-Python computation with HF `tokenizers` as the encoder
(each line encoded on its own, without template tokens): exact for counts and ratios, 1e-9
relative for the Rényi efficiency (summation order). The bytes-per-token curve over merge-list
prefixes against HF encoding with the merge list cut to its first k merges."""

from __future__ import annotations

import json
import math
import random
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import tokenizers

from tests.support.corpora import corpus
from tests.support.markers import tiered
from tokcolumnar import TokcolumnarWarning, Tokenizer
from tokcolumnar.report.compare import compare_tables
from tokcolumnar.report.metrics import count_text, metrics_table, renyi_efficiency

pytestmark = [pytest.mark.corpus,
              pytest.mark.filterwarnings("ignore::tokcolumnar.errors.TokcolumnarWarning")]


def lines_of(path: Path) -> list[str]:
    """The file's lines as training reads them: cut after each \\n, line ending kept."""
    text = path.read_bytes().decode("utf-8")
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return lines


def plain_metrics(tokdir: Path, path: Path) -> dict[str, float]:
    """Every metric by plain Python over HF's encodings (words: whitespace runs, valid for
    texts without scripts written without spaces)."""
    hf = tokenizers.Tokenizer.from_file(str(tokdir / "tokenizer.json"))
    lines = lines_of(path)
    encs = hf.encode_batch(lines, add_special_tokens=False)
    ids = [i for e in encs for i in e.ids]
    words = [w for line in lines for w in line.split()]
    distinct = sorted(set(words))
    n_tok = dict(zip(distinct, (len(e.ids) for e in hf.encode_batch(
        distinct, add_special_tokens=False))))
    vocab = hf.get_vocab(with_added_tokens=True)
    v_size = hf.get_vocab_size(with_added_tokens=True)
    model = json.loads((tokdir / "tokenizer.json").read_text())["model"]
    unk = vocab.get(model.get("unk_token")) if model.get("unk_token") else None
    # characters the model cannot represent, over the characters of the pre-tokens
    unknown = pre_chars = 0
    for line in lines:
        norm = hf.normalizer.normalize_str(line) if hf.normalizer else line
        for piece, _ in hf.pre_tokenizer.pre_tokenize_str(norm):
            pre_chars += len(piece)
            if model["type"] == "WordPiece":
                if hf.encode(piece, add_special_tokens=False).ids == [unk]:
                    unknown += len(piece)
            elif model["type"] == "BPE" and "Ġ" not in vocab:
                unknown += sum(c not in vocab for c in piece)
    counts = Counter(ids)
    p = [c / len(ids) for c in counts.values()]
    n_bytes = sum(len(line.encode()) for line in lines)
    n_chars = sum(len(line) for line in lines)
    return {
        "bytes": n_bytes, "chars": n_chars, "words": len(words), "tokens": len(ids),
        "bytes_per_token": n_bytes / len(ids), "chars_per_token": n_chars / len(ids),
        "fertility": len(ids) / len(words),
        "split_word_share": sum(n_tok[w] > 1 for w in words) / len(words),
        "unknown_rate": (counts[unk] if unk is not None else 0) / len(ids),
        "unknown_char_share": unknown / pre_chars,
        "vocab_utilization": len(counts) / v_size,
        "renyi_efficiency": math.log(sum(x ** 2.5 for x in p)) / (1 - 2.5) / math.log(v_size),
    }


CASES = [("bpe", "small/en_taylorswift_wiki.txt"), ("gpt2", "small/en_taylorswift_wiki.txt"),
         ("bert", "small/en_taylorswift_wiki.txt"), ("bpe", "small/ru_pushkin_300k.txt"),
         ("bpe_unk", "small/ru_pushkin_300k.txt"), ("bert", "small/ru_pushkin_300k.txt"),
         ("gpt2", "small/ru_pushkin_300k.txt")]
# the fast tier: one case per model kind (and the unknown token); the full run has them all
FAST = {CASES[0], CASES[2], CASES[4], CASES[1]}


@pytest.mark.parametrize(("name", "text"), tiered(CASES, lambda c: c in FAST, multi=True))
def test_metrics_equal_a_plain_python_computation(tokdir, name: str, text: str) -> None:
    d, path = tokdir(name), corpus(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, _ = metrics_table(Tokenizer.from_dir(d), [str(path)], curve=False)
    row = got.row(0, named=True)
    # a file with characters the model cannot represent is warned about, the others are not
    notes = [w for w in caught if issubclass(w.category, TokcolumnarWarning)]
    assert len(notes) == (row["unknown_char_share"] > 0)
    want = plain_metrics(d, path)
    for key, value in want.items():
        if key == "renyi_efficiency":
            assert row[key] == pytest.approx(value, rel=1e-9), key
        else:
            assert row[key] == value, (key, row[key], value)
    if name in ("bpe", "bert", "bpe_unk") and "ru_" in text:
        # an English vocabulary cannot represent Cyrillic: the share says so
        assert row["unknown_char_share"] > 0.5
    if name == "bpe_unk" and "ru_" in text:
        assert row["unknown_rate"] > 0.3


def test_renyi_efficiency_matches_tokenization_scorer() -> None:
    """tokenization-scorer's own test values (v1.1.8, power 2.5, |V| = types observed):
    "pick @@ed pick @@l @@ed pick @@les" and
    "pick @@e @@d pick @@l @@e @@d pick @@l @@e @@s"."""
    assert renyi_efficiency(np.array([3, 2, 1, 1.0]), 4) == pytest.approx(
        0.8265064834225245, rel=1e-12)
    assert renyi_efficiency(np.array([3, 3, 2, 2, 1.0]), 5) == pytest.approx(
        0.9204840242168808, rel=1e-12)


def test_words_split_scripts_written_without_spaces(tokdir, tmp_path: Path) -> None:
    """Each Han/kana/Thai character (with its combining marks) is a word; other non-space runs
    are words. Counted by hand: 你 好 world! 日 本 語 で す , abćd ไ ท ย → 13."""
    f = tmp_path / "mixed.txt"
    f.write_text("你好 world! 日本語です, abc\u0301d\nไทย\n", encoding="utf-8")
    tc = count_text(Tokenizer.from_dir(tokdir("bpe")), f)
    assert int(tc.words.get_column("n").sum()) == 13
    assert dict(zip(*tc.words.filter(pl.col("n") > 1).to_dict(as_series=False).values())) == {}
    assert tc.bytes == len(f.read_bytes()) and tc.chars == len(f.read_text(encoding="utf-8"))


def hf_tokens_with_merges(tokdir: Path, lines: list[str], k: int) -> int:
    d = json.loads((tokdir / "tokenizer.json").read_text())
    d["model"]["merges"] = d["model"]["merges"][:k]
    hf = tokenizers.Tokenizer.from_str(json.dumps(d))
    return sum(len(e.ids) for e in hf.encode_batch(lines, add_special_tokens=False))


@pytest.mark.parametrize("name", tiered(["bpe", "gpt2"], lambda n: n == "bpe"))
def test_prefix_curve_equals_encoding_with_the_first_k_merges(tokdir, name: str) -> None:
    d, path = tokdir(name), corpus("small/en_taylorswift_wiki.txt")
    tok = Tokenizer.from_dir(d)
    metrics, curve = metrics_table(tok, [str(path)])
    n = len(tok.model.merges)
    assert curve.height == n + 1
    assert curve.get_column("k").to_list() == list(range(n + 1))
    lines = lines_of(path)
    rng = random.Random(15)
    ks = sorted({0, 1, 2, 10, 100, n // 2, n - 1, n, *rng.sample(range(n + 1), 6)})
    for k in ks:
        want = hf_tokens_with_merges(d, lines, k)
        assert curve.filter(pl.col("k") == k).get_column("tokens").item() == want, k
    # the full list gives the metrics' own token count; sizes grow by one id per merge here
    assert curve.get_column("tokens")[-1] == metrics.get_column("tokens").item()
    assert curve.get_column("vocab_size").to_list() == list(
        range(tok.get_vocab_size() - n, tok.get_vocab_size() + 1))
    assert curve.get_column("tokens").diff().drop_nulls().max() <= 0  # never more tokens


def test_compare_parity_and_overlap(tokdir, tmp_path: Path) -> None:
    """parity = tokens / tokens of the first file, per tokenizer; Jaccard of a vocabulary with
    itself is 1 and its merge lists agree everywhere."""
    en = corpus("small/en_taylorswift_wiki.txt")
    ru = corpus("small/ru_pushkin_300k.txt")
    a, b = tokdir("gpt2"), tokdir("multi")
    met, overlap = compare_tables([str(a), str(b), str(b / "tokenizer.json")], [str(en), str(ru)])
    assert met.height == 6
    for tok in met.get_column("tokenizer").unique():
        rows = met.filter(pl.col("tokenizer") == tok)
        t = rows.get_column("tokens").to_list()
        assert rows.get_column("parity").to_list() == [1.0, t[1] / t[0]]
    # the same tokenizer loaded from its directory and from its tokenizer.json: same numbers
    m = met.drop("tokenizer")
    assert m.slice(2, 2).to_dicts() == m.slice(4, 2).to_dicts()
    same = overlap.filter(pl.col("a") == "multi").row(0, named=True)
    assert same["jaccard"] == 1.0
    assert same["shared_merge_prefix"] == len(Tokenizer.from_dir(b).model.merges)
    ab = overlap.row(0, named=True)
    hf_a = set(tokenizers.Tokenizer.from_file(str(a / "tokenizer.json")).get_vocab())
    hf_b = set(tokenizers.Tokenizer.from_file(str(b / "tokenizer.json")).get_vocab())
    # both byte-level: the same byte strings are the same surfaces
    assert ab["jaccard"] == len(hf_a & hf_b) / len(hf_a | hf_b)


@pytest.mark.slow
def test_wordpiece_curve_equals_hf_with_the_first_k_merge_tokens(tokdir) -> None:
    """WordPiece: at each grid point, HF's WordPiece over the base vocabulary plus the tokens
    of the first k merges gives the same token count."""
    d, path = tokdir("bert"), corpus("small/en_taylorswift_wiki.txt")
    tok = Tokenizer.from_dir(d)
    ranks = pl.read_parquet(d / "vocab.parquet", columns=["token", "id", "rank"])
    _, curve = metrics_table(tok, [str(path)], ranks=ranks)
    n_merges = int(ranks.get_column("rank").max()) + 1
    ks = curve.get_column("k").to_list()
    assert ks[0] == 0 and ks[-1] == n_merges and len(ks) > 8
    lines = lines_of(path)
    full = json.loads((d / "tokenizer.json").read_text())
    for k in ks[::3] + [ks[-1]]:
        keep = ranks.filter(pl.col("rank").is_null() | (pl.col("rank") < k))
        full["model"]["vocab"] = dict(zip(keep.get_column("token").to_list(),
                                          keep.get_column("id").cast(pl.Int64).to_list()))
        hf = tokenizers.Tokenizer.from_str(json.dumps(full))
        want = sum(len(e.ids) for e in hf.encode_batch(lines, add_special_tokens=False))
        row = curve.filter(pl.col("k") == k).row(0, named=True)
        assert row["tokens"] == want, k
        assert row["vocab_size"] == keep.height
