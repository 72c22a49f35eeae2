"""WordPiece against HuggingFace `tokenizers`: frequency scoring = `WordPieceTrainer`, and HF
loading our `tokenizer.json` / `vocab.txt` encodes every line to the ids our encoder gives
(special tokens, [UNK] and pairs included)."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, normalizers, pre_tokenizers, trainers
from tokenizers.implementations import BertWordPieceTokenizer

import tokcolumnar as tc
from tests.support.corpora import SMALL, corpus, small_scripts, small_tiered
from tokcolumnar import Tokenizer
from tokcolumnar.text.decoders import WordPieceDecoder
from tokcolumnar.training.symbols import build_initial

pytestmark = pytest.mark.corpus

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def hf_wordpiece(path: Path, vocab_size: int, bert: bool) -> dict[str, int]:
    tok = HFTokenizer(models.WordPiece(unk_token="[UNK]"))
    if bert:
        tok.normalizer = normalizers.BertNormalizer()
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train([str(path)], trainers.WordPieceTrainer(vocab_size=vocab_size,
                                                     special_tokens=BERT_SPECIALS,
                                                     show_progress=False))
    return tok.get_vocab()


def hf_variant_order(vocab: dict[str, int]) -> list[str]:
    """HF assigns the ids of `##x` variants in hash order: read that order back."""
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])
            if t.startswith("##") and len(t) == 3]


@cache
def initial_size(name: str, bert: bool) -> int:
    """Specials + alphabet + ## variants of a small corpus (the vocab before any merge)."""
    opts = {"preset": "bert"} if bert else {"model": "wordpiece"}
    words = tc.count_words(str(corpus(f"small/{name}")), **opts)
    return len(build_initial(words, BERT_SPECIALS, None, [], "##", None, None).vocab)


# -- frequency scoring = HF WordPieceTrainer ------------------------------------------------
@pytest.mark.parametrize("bert", [False, True], ids=["whitespace", "bert"])
@pytest.mark.parametrize("name", small_tiered("en_botchan.txt"))
def test_frequency_scoring_equals_hf_wordpiece_trainer(name, bert):
    path = corpus(f"small/{name}")
    vs = max(2000, initial_size(name, bert) + 1500)
    hf = hf_wordpiece(path, vs, bert)
    opts = {"preset": "bert"} if bert else {"model": "wordpiece",
                                            "special_tokens": BERT_SPECIALS}
    r = tc.train(str(path), wordpiece_scoring="frequency", vocab_size=vs,
                 variant_order=hf_variant_order(hf), **opts)
    ours = dict(zip(r.vocab["token"].to_list(), r.vocab["id"].to_list()))
    # with HF's (hash-ordered) variant ids, every tie breaks the same way: identical vocab
    assert ours == hf


def test_frequency_scoring_default_ids_are_deterministic():
    path = corpus("small/en_botchan.txt")
    a = tc.train(str(path), model="wordpiece", wordpiece_scoring="frequency", vocab_size=3000)
    b = tc.train(str(path), model="wordpiece", wordpiece_scoring="frequency", vocab_size=3000)
    assert a.vocab.equals(b.vocab) and a.merges.equals(b.merges)
    variants = a.vocab.filter(a.vocab["kind"] == "variant")["token"].to_list()
    assert variants == sorted(variants)


# -- encoding: HF loading our files = our encoder -------------------------------------------
# removed when the test process exits (a mkdtemp per call left hundreds behind in /tmp)
_TRAINED = tempfile.TemporaryDirectory(prefix="wp_hf_")


@cache
def trained(name: str, bert: bool, scoring: str, vocab: int) -> Path:
    out = Path(tempfile.mkdtemp(dir=_TRAINED.name)) / "tok"
    path = corpus(f"small/{name}")
    opts = {"preset": "bert"} if bert else {"model": "wordpiece",
                                            "special_tokens": BERT_SPECIALS,
                                            "unk_token": "[UNK]"}
    tc.train(str(path), vocab_size=vocab, wordpiece_scoring=scoring, out_dir=out, **opts)
    return out


def check_same_ids(out: Path, texts: list[str], bert_vocab_txt: bool) -> None:
    ours = Tokenizer.from_dir(out)
    enc = ours.encode_ids(texts)
    ids = enc["ids"].to_list()
    wids = enc["word_ids"].to_list()
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    hf_enc = hf.encode_batch(texts)
    bad = [i for i, e in enumerate(hf_enc) if e.ids != ids[i]]
    assert not bad, (texts[bad[0]][:200], ids[bad[0]][:30], hf_enc[bad[0]].ids[:30])
    # HF numbers added tokens written in the text as words; tokcolumnar.tokenizer gives them
    # no word id (a tokenizer.py matter): compare word ids on texts without them
    specials = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert all(e.word_ids == wids[i] for i, e in enumerate(hf_enc)
               if not any(t in texts[i] for t in specials))
    if bert_vocab_txt:
        bw = BertWordPieceTokenizer(str(out / "vocab.txt"))
        bad = [i for i, e in enumerate(bw.encode_batch(texts)) if e.ids != ids[i]]
        assert not bad, (texts[bad[0]][:200], ids[bad[0]][:30])


@pytest.mark.parametrize("scoring", ["likelihood", "frequency"])
@pytest.mark.parametrize("name", small_scripts("en_botchan.txt"))
def test_bert_preset_encodes_like_hf(name, scoring):
    vs = max(3000, initial_size(name, True) + 2000)
    out = trained(name, True, scoring, vs)
    lines = lines_of(corpus(f"small/{name}"))
    check_same_ids(out, lines, bert_vocab_txt=True)
    ids = Tokenizer.from_dir(out).encode_ids(lines[:50])["ids"].to_list()
    vocab = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    assert all(x[0] == vocab["[CLS]"] and x[-1] == vocab["[SEP]"] for x in ids)


@pytest.mark.parametrize("name", small_scripts("udhr_multiscript.txt"))
def test_whitespace_wordpiece_encodes_like_hf(name):
    vs = max(2000, initial_size(name, False) + 1500)
    out = trained(name, False, "likelihood", vs)
    check_same_ids(out, lines_of(corpus(f"small/{name}")), bert_vocab_txt=False)


def test_unknown_characters_long_words_and_specials_like_hf():
    """A tokenizer trained on English encodes every other small corpus (mostly [UNK]), words
    over 100 characters, and special tokens written in the text."""
    out = trained("en_botchan.txt", True, "likelihood", 3000)
    texts: list[str] = []
    for name in SMALL:
        texts.extend(lines_of(corpus(f"small/{name}"))[:300])
    texts += ["a" * 100, "a" * 101, "b" * 100 + "!", "x" * 250 + " ok", "",
              "[CLS] hello [SEP] [MASK] world [UNK]", "naïve café ÅNGSTRÖM", "\t \u3000 ",
              "unaffable" * 11, "unaffable" * 12]
    check_same_ids(out, texts, bert_vocab_txt=True)


def test_pairs_like_hf():
    out = trained("en_botchan.txt", True, "likelihood", 3000)
    lines = [x for x in lines_of(corpus("small/en_botchan.txt")) if x.strip()][:400]
    firsts, seconds = lines[0::2], lines[1::2]
    n = min(len(firsts), len(seconds))
    firsts, seconds = firsts[:n], seconds[:n]
    ours = Tokenizer.from_dir(out).encode_pair_ids(firsts, seconds)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    for i, (a, b) in enumerate(zip(firsts, seconds)):
        e = hf.encode(a, b)
        assert ours["ids"][i].to_list() == e.ids
        assert ours["type_ids"][i].to_list() == e.type_ids
        assert ours["word_ids"][i].to_list() == e.word_ids


def test_decode_like_hf():
    out = trained("en_botchan.txt", True, "likelihood", 3000)
    ours = Tokenizer.from_dir(out)
    # a WordPiece tokenizer decodes with the WordPiece decoder (a lost decoder is a failure)
    assert isinstance(ours.decoder, WordPieceDecoder), ours.decoder
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    lines = lines_of(corpus("small/en_botchan.txt"))[:500]
    for line, e in zip(lines, hf.encode_batch(lines)):
        assert ours.decode(e.ids) == hf.decode(e.ids), line
