"""Slow, plain-Python reference implementations of BPE training, for comparing the columnar
engine against.

- `naive_bpe`: the seeds' algorithm. Recount every pair from scratch at each step, pick the best
  by the tie-break, merge every occurrence left to right. This is what `lexical-max` and
  `first-seen` promise, and what `id` gives whenever no merge re-creates an existing token.
- `hf_bpe`: a line-by-line transcription of HuggingFace's `BpeTrainer.do_train` (queue of
  entries, each with the set of words it was created for, lazily re-counted). This is what the
  default `id` tie-break promises in every case.

Both take words in first-seen order as `(word, count)` pairs and return a list of
`(left, right, count)` merges and the final vocabulary list (index = id)."""

from __future__ import annotations

import heapq
from collections import Counter


def initial_vocab(words, special_tokens=(), limit_alphabet=None, initial_alphabet=(),
                  prefix=None, suffix=None, eow_token=None, variant_order=None):
    """Ids as docs/architecture.md assigns them, and each word's initial symbol strings."""
    counts = Counter()
    for w, c in words:
        for ch in w:
            counts[ch] += c
    for ch in initial_alphabet:
        counts[ch] = float("inf")
    chars = list(counts)
    if limit_alphabet is not None and len(chars) > limit_alphabet:
        chars = sorted(chars, key=lambda ch: (-counts[ch], ord(ch)))[:limit_alphabet]
    vocab, base = [], {}

    def add(t, n):
        if t not in base:
            vocab.append(t)
            base[t] = n

    for t in special_tokens:
        add(t, len(t))
    for ch in sorted(chars, key=ord):
        add(ch, 1)
    if eow_token is not None:
        add(eow_token, 0)
    segs = []
    for w, c in words:
        syms = []
        for i, ch in enumerate(w):
            if ch not in base:
                continue
            s = ch
            if prefix is not None and i > 0:
                s = prefix + s
            if suffix is not None and i == len(w) - 1:
                s = s + suffix
            syms.append(s)
        if eow_token is not None:
            syms.append(eow_token)
        segs.append([syms, c])
    variants = sorted({s for syms, _ in segs for s in syms} - set(base))
    if variant_order:
        rank = {t: i for i, t in enumerate(variant_order)}
        variants.sort(key=lambda v: (rank.get(v, len(rank)), v))
    for v in variants:
        add(v, 1)
    return vocab, base, segs


def _new_token(x, y, prefix):
    if prefix and y.startswith(prefix):
        y = y[len(prefix):]
    return x + y


def merge_word(syms, x, y, new):
    """`syms` with every occurrence of `x y` replaced by `new`, left to right (shared with the
    WordPiece oracle)."""
    out, i = [], 0
    while i < len(syms):
        if i + 1 < len(syms) and syms[i] == x and syms[i + 1] == y:
            out.append(new)
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return out


def naive_bpe(words, vocab_size, min_frequency=0, tie_break="id", special_tokens=(),
              limit_alphabet=None, initial_alphabet=(), prefix=None, suffix=None,
              eow_token=None, max_token_length=None, variant_order=None):
    vocab, base, segs = initial_vocab(words, special_tokens, limit_alphabet, initial_alphabet,
                                      prefix, suffix, eow_token, variant_order)
    ids = {t: i for i, t in enumerate(vocab)}
    merges = []
    while len(vocab) < vocab_size:
        pairs = {}  # insertion order = first occurrence (word order, then position)
        for syms, c in segs:
            for x, y in zip(syms, syms[1:]):
                if max_token_length is not None and base[x] + base[y] > max_token_length:
                    continue
                pairs[(x, y)] = pairs.get((x, y), 0) + c
        if not pairs:
            break
        top = max(pairs.values())
        tied = [p for p, c in pairs.items() if c == top]
        if tie_break == "id":
            best = min(tied, key=lambda p: (ids[p[0]], ids[p[1]]))
        elif tie_break == "lexical-max":
            best = max(tied)
        else:
            best = tied[0]
        if top < 1 or top < min_frequency:
            break
        x, y = best
        new = _new_token(x, y, prefix)
        if new not in ids:
            ids[new] = len(vocab)
            vocab.append(new)
            base[new] = base[x] + base[y]
        for seg in segs:
            seg[0] = merge_word(seg[0], x, y, new)
        merges.append((x, y, top))
    return merges, vocab


def hf_bpe(words, vocab_size, min_frequency=0, special_tokens=(), limit_alphabet=None,
           initial_alphabet=(), prefix=None, suffix=None, eow_token=None, variant_order=None):
    """HF `BpeTrainer.do_train`, transcribed (no max_token_length: HF's rule is off by one)."""
    vocab, base, segs = initial_vocab(words, special_tokens, limit_alphabet, initial_alphabet,
                                      prefix, suffix, eow_token, variant_order)
    ids = {t: i for i, t in enumerate(vocab)}
    words_ids = [[ids[s] for s in syms] for syms, _ in segs]
    counts = [c for _, c in segs]
    pair_counts: dict = {}
    where: dict = {}
    for i, w in enumerate(words_ids):
        for p in zip(w, w[1:]):
            pair_counts[p] = pair_counts.get(p, 0) + counts[i]
            where.setdefault(p, set()).add(i)
    queue, seq = [], 0
    for p, pos in where.items():
        if pair_counts[p] > 0:
            heapq.heappush(queue, (-pair_counts[p], p, seq, pos))
            seq += 1
    merges = []
    while len(vocab) < vocab_size and queue:
        negc, pair, s, pos = heapq.heappop(queue)
        if -negc != pair_counts[pair]:
            heapq.heappush(queue, (-pair_counts[pair], pair, s, pos))
            continue
        count = -negc
        if count < 1 or min_frequency > count:
            break
        new = _new_token(vocab[pair[0]], vocab[pair[1]], prefix)
        if new not in ids:
            ids[new] = len(vocab)
            vocab.append(new)
        nid = ids[new]
        merges.append((vocab[pair[0]], vocab[pair[1]], count))
        changes = []
        for i in sorted(pos):
            w = words_ids[i]
            j = 0
            while j < len(w):  # HF Word::merge
                if w[j] == pair[0] and j + 1 < len(w) and w[j + 1] == pair[1]:
                    if j > 0:
                        changes.append(((w[j - 1], pair[0]), -1, i))
                        changes.append(((w[j - 1], nid), 1, i))
                    w[j:j + 2] = [nid]
                    if j < len(w) - 1:
                        changes.append(((pair[1], w[j + 1]), -1, i))
                        changes.append(((nid, w[j + 1]), 1, i))
                j += 1
        new_where: dict = {}
        for p, ch, i in changes:
            pair_counts[p] = pair_counts.get(p, 0) + ch * counts[i]
            if ch > 0:
                new_where.setdefault(p, set()).add(i)
        for p, pos2 in new_where.items():
            if pair_counts[p] > 0:
                heapq.heappush(queue, (-pair_counts[p], p, seq, pos2))
                seq += 1
    return merges, vocab
