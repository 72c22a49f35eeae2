"""The seed documents' worked examples (../shared/seeds/000 and 002), reproduced step by step.

The seeds' own Python is copied here verbatim (their `get_stats` and both `merge_vocab`
versions) and run as the reference: at every step our `first-seen` trainer must pick the same
pair with the same count."""

from __future__ import annotations

import re
from collections import defaultdict

import polars as pl

from tokcolumnar import train


# --- seed 000 / 002 code, verbatim -----------------------------------------------------------
def get_stats(vocab):
    pairs = defaultdict(int)
    for word, freq in vocab.items():
        symbols = word.split()
        for i in range(len(symbols) - 1):
            pairs[symbols[i], symbols[i + 1]] += freq
    return pairs


def merge_vocab_000(pair, vocab_in):
    """Seed 000: plain str.replace (can merge across a symbol boundary)."""
    vocab_out = {}
    bigram = ' '.join(pair)
    replacement = ''.join(pair)
    for word in vocab_in:
        w_out = word.replace(bigram, replacement)
        vocab_out[w_out] = vocab_in[word]
    return vocab_out


def merge_vocab_002(pair, vocab):
    """Seed 002: the same with whole-symbol boundaries."""
    bigram = re.escape(' '.join(pair))
    pattern = re.compile(r'(?<!\S)' + bigram + r'(?!\S)')
    new_vocab = {}
    for word in vocab:
        new_word = pattern.sub(''.join(pair), word)
        new_vocab[new_word] = vocab[word]
    return new_vocab
# ----------------------------------------------------------------------------------------------


def seed_steps(vocab, num_merges, merge_vocab):
    """Run the seeds' loop, recording (pair, count) at each step."""
    steps = []
    for _ in range(num_merges):
        pairs = get_stats(vocab)
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        steps.append((best, pairs[best]))
        vocab = merge_vocab(best, vocab)
    return steps, vocab


def our_steps(word_counts: dict[str, int], num_merges: int, **options):
    words = pl.DataFrame({"word": list(word_counts), "count": list(word_counts.values())},
                         schema={"word": pl.String, "count": pl.UInt64})
    words = words.with_row_index("first_seen").select("word", "count", "first_seen")
    r = train(from_counts=words, vocab_size=10**6, max_merges=num_merges,
              tie_break="first-seen", **options)
    m = r.merges
    steps = [((a, b), c) for a, b, c in zip(m["left"], m["right"], m["count"])]
    return steps, r


def test_seed_002_low_lower_newest_widest():
    vocab = {'l o w </w>': 5, 'l o w e r </w>': 2, 'n e w e s t </w>': 6, 'w i d e s t </w>': 3}
    expected, final = seed_steps(vocab, 10, merge_vocab_002)
    # the seed's printed output: step 1 ('e','s'), step 2 ('es','t')
    assert expected[0] == (('e', 's'), 9) and expected[1] == (('es', 't'), 9)
    ours, r = our_steps({'low': 5, 'lower': 2, 'newest': 6, 'widest': 3}, 10,
                        end_of_word_token='</w>')
    assert ours == expected
    segs = dict(zip(r.words["word"], r.words["tokens"].to_list()))
    assert {" ".join(segs[w.replace(" ", "").replace("</w>", "")]): c
            for w, c in vocab.items()} == final


def test_seed_000_hug_pug_pun_bun_hugs():
    vocab = {'h u g': 10, 'p u g': 5, 'p u n': 12, 'b u n': 4, 'h u g s': 5}
    expected, final = seed_steps(vocab, 3, merge_vocab_000)
    assert [p for p, _ in expected] == [('u', 'g'), ('u', 'n'), ('h', 'ug')]
    assert [c for _, c in expected] == [20, 16, 15]
    ours, r = our_steps({'hug': 10, 'pug': 5, 'pun': 12, 'bun': 4, 'hugs': 5}, 3)
    assert ours == expected
    segs = dict(zip(r.words["word"], r.words["tokens"].to_list()))
    assert {" ".join(segs[w.replace(" ", "")]): c for w, c in vocab.items()} == final


def test_str_replace_trap_crosses_symbol_boundary():
    """Seed 000's `str.replace` merges ('c','d') inside 'a bc d' (across the 'bc' symbol);
    seed 002's boundary-aware version does not, and neither do we."""
    vocab = {'b c': 10, 'a b c d': 1, 'c d': 5}
    naive, naive_final = seed_steps(vocab, 2, merge_vocab_000)
    correct, correct_final = seed_steps(vocab, 2, merge_vocab_002)
    assert naive == correct == [(('b', 'c'), 11), (('c', 'd'), 5)]
    assert 'a bcd' in naive_final and 'a bc d' in correct_final
    naive, _ = seed_steps(vocab, 4, merge_vocab_000)
    correct, _ = seed_steps(vocab, 4, merge_vocab_002)
    assert naive != correct
    ours, _ = our_steps({'bc': 10, 'abcd': 1, 'cd': 5}, 4)
    assert ours == correct
