"""Slow, plain-Python reference for likelihood WordPiece training (seeds 003/004, HF course
chapter 6.6), with the ids and tie-breaks of docs/architecture.md.

At every step: the score of each adjacent pair is `count(ab) / (count(a) * count(b))` over the
current segmentation (weighted by word counts), computed exactly as
`c_ab / (float(c_a) * float(c_b))`; the best pair has the highest score, then the highest pair
count, then the smallest `(id(a), id(b))`; every occurrence is merged, left to right.

To stay usable on real files, token and pair counts are kept in dicts and updated by taking
each touched word out (subtracting all its tokens and pairs) and putting it back re-segmented;
the scores of *all* pairs are then recomputed from scratch and the maximum taken by a full scan.
There is no heap and no cleverness about which scores changed."""

from __future__ import annotations

from tests.support.bpe_oracle import merge_word


def with_unk(special_tokens=()) -> list[str]:
    """The special tokens of a `--model wordpiece` run: the given ones, then [UNK] when they
    lack it (the unknown token needs an id: issue 27, item 12)."""
    sp = list(special_tokens)
    return sp if "[UNK]" in sp else [*sp, "[UNK]"]


def initial_vocab(words, special_tokens=(), prefix="##", limit_alphabet=None,
                  variant_order=None):
    """Ids (specials, alphabet by code point, `##` variants by string) and each word's symbols."""
    special_tokens = with_unk(special_tokens)
    counts: dict[str, int] = {}
    for w, c in words:
        for ch in w:
            counts[ch] = counts.get(ch, 0) + c
    chars = list(counts)
    if limit_alphabet is not None and len(chars) > limit_alphabet:
        chars = sorted(chars, key=lambda ch: (-counts[ch], ord(ch)))[:limit_alphabet]
    vocab: list[str] = []
    for t in special_tokens:
        if t not in vocab:
            vocab.append(t)
    for ch in sorted(chars, key=ord):
        if ch not in vocab:
            vocab.append(ch)
    keep = set(vocab)
    segs = []
    for w, c in words:
        syms = [ch if i == 0 else prefix + ch for i, ch in enumerate(w) if ch in keep]
        segs.append([syms, c])
    known = set(vocab)
    variants = sorted({s for syms, _ in segs for s in syms} - known)
    if variant_order:
        rank = {t: i for i, t in enumerate(variant_order)}
        variants.sort(key=lambda v: (rank.get(v, len(rank)), v))
    vocab.extend(variants)
    return vocab, segs


def likelihood_wordpiece(words, vocab_size, prefix="##", special_tokens=(), max_merges=None,
                         min_score=None, min_frequency=0, limit_alphabet=None,
                         max_token_length=None, variant_order=None, trace=False):
    """`words`: (word, count) pairs. Returns (merges, vocab): merges as
    `(left, right, pair_count, score)` (plus `(c_left, c_right)` when `trace`), vocab as the
    list of tokens (index = id). `max_token_length` counts characters without the prefix."""
    special_tokens = with_unk(special_tokens)
    vocab, segs = initial_vocab(words, special_tokens, prefix, limit_alphabet, variant_order)
    ids = {t: i for i, t in enumerate(vocab)}
    base = {t: (len(t) if i < len(special_tokens) else 1) for i, t in enumerate(vocab)}
    tok: dict[str, int] = {}
    pair: dict[tuple[str, str], int] = {}
    has: dict[tuple[str, str], set[int]] = {}

    def account(i, sign):
        syms, c = segs[i]
        for s in syms:
            tok[s] = tok.get(s, 0) + sign * c
        for p in zip(syms, syms[1:]):
            pair[p] = pair.get(p, 0) + sign * c
            if sign > 0:
                has.setdefault(p, set()).add(i)

    for i in range(len(segs)):
        account(i, +1)
    merges = []
    while len(vocab) < vocab_size:
        if max_merges is not None and len(merges) >= max_merges:
            break
        best, best_key = None, None
        for (x, y), c in pair.items():
            if c <= 0 or c < min_frequency:
                continue
            if max_token_length is not None and base[x] + base[y] > max_token_length:
                continue
            score = c / (float(tok[x]) * float(tok[y]))
            key = (score, c, -ids[x], -ids[y])
            if best_key is None or key > best_key:
                best, best_key = (x, y), key
        if best is None:
            break
        score, count = best_key[0], best_key[1]
        if min_score is not None and score < min_score:
            break
        x, y = best
        new = x + (y[len(prefix):] if y.startswith(prefix) else y)
        if new not in ids:
            ids[new] = len(vocab)
            vocab.append(new)
            base[new] = base[x] + base[y]
        merges.append((x, y, count, score, (tok[x], tok[y])) if trace else (x, y, count, score))
        for i in sorted(has.pop(best, ())):
            syms = segs[i][0]
            if not any(a == x and b == y for a, b in zip(syms, syms[1:])):
                continue
            account(i, -1)
            segs[i][0] = merge_word(syms, x, y, new)
            account(i, +1)
        for p in [p for p, c in pair.items() if c == 0]:
            del pair[p]
    return merges, vocab


def frequency_wordpiece(words, vocab_size, prefix="##", special_tokens=(), variant_order=None):
    """Frequency scoring (HF `WordPieceTrainer`): the highest pair count, ties by smallest
    `(id(a), id(b))`, every occurrence merged. Equals HF when no merge re-creates an existing
    token (HF then merges only some words; see bpe_oracle.hf_bpe)."""
    vocab, segs = initial_vocab(words, special_tokens, prefix, None, variant_order)
    ids = {t: i for i, t in enumerate(vocab)}
    merges = []
    while len(vocab) < vocab_size:
        pair: dict[tuple[str, str], int] = {}
        for syms, c in segs:
            for p in zip(syms, syms[1:]):
                pair[p] = pair.get(p, 0) + c
        if not pair:
            break
        top = max(pair.values())
        x, y = min((p for p, c in pair.items() if c == top), key=lambda p: (ids[p[0]], ids[p[1]]))
        new = x + (y[len(prefix):] if y.startswith(prefix) else y)
        if new not in ids:
            ids[new] = len(vocab)
            vocab.append(new)
        merges.append((x, y, top))
        for seg in segs:
            seg[0] = merge_word(seg[0], x, y, new)
    return merges, vocab


def greedy_encode(word, vocab, prefix="##", unk="[UNK]", max_chars=100):
    """Greedy longest-match-first (seed 004's `encode_word`, with HF's `max_input_chars_per_word`
    rule): a word with an unmatched piece, or longer than `max_chars`, is one `[UNK]`."""
    if len(word) > max_chars:
        return [unk]
    out, start = [], 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            sub = word[start:end] if start == 0 else prefix + word[start:end]
            if sub in vocab:
                piece = sub
                break
            end -= 1
        if piece is None:
            return [unk]
        out.append(piece)
        start = end
    return out
