"""A plain-Python Unigram trainer that reproduces SentencePiece's `spm_train --model_type=unigram`.

Line by line a port of SentencePiece's `trainer_interface.cc` (loading, required characters,
whitespace split), `unigram_model_trainer.cc` (seeds, EM, pruning, final cut) and
`unigram_model.cc` (the lattice: Viterbi, forward-backward, 2-best), loops and all, for small
corpora. docs/unigram.md describes the algorithm; the comments here say which line of
SentencePiece each step copies. Its float arithmetic is SentencePiece's: every `float` of the
C++ is rounded to float32 here (`f32`) at the same places, every `double` kept as a Python float,
and sums run in SentencePiece's order, its threads included (`num_threads`: sentence i goes to
thread i mod n, the threads' sums are added in thread order), so that the pieces and scores come
out bit-identical to spm_train's on the inputs where SentencePiece itself is deterministic.

Only the options this project reproduces are here: identity normalization (the caller normalizes:
`normalize_identity` is SentencePiece's `identity` rule with its whitespace handling), no
user-defined or control symbols, no byte fallback, text input (one sentence per line)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from tokcolumnar.text.unicode_scripts import SCRIPT_NAMES, SCRIPT_RANGES

WS = "\u2581"  # kWSChar: the escaped space
UNK_CHAR = "\u2585"  # kUNKChar: stands for a character outside the required ones
META = 3  # <unk>, <s>, </s>
BOUNDARY_CHAR = "\x1f"  # kPretokenizationBoundaryChar: never in a piece, never required

_HAN = SCRIPT_NAMES.index("Han")
_HIRAGANA = SCRIPT_NAMES.index("Hiragana")
_KATAKANA = SCRIPT_NAMES.index("Katakana")
_INHERITED = SCRIPT_NAMES.index("Inherited")
_ANY = -1
_STARTS = [a for a, _, _ in SCRIPT_RANGES]


def f32(x: float) -> float:
    """x rounded to float32 (round to nearest even), as a C++ `float` holds it."""
    return float(np.float32(x))


@dataclass
class Options:
    """The TrainerSpec fields the trainer reads, with SentencePiece's defaults."""

    vocab_size: int = 8000
    character_coverage: float = 0.9995
    seed_sentencepiece_size: int = 1_000_000
    shrinking_factor: float = 0.75
    max_sentencepiece_length: int = 16
    num_sub_iterations: int = 2
    num_threads: int = 16
    max_sentence_length: int = 4192
    split_by_unicode_script: bool = True
    split_by_number: bool = True
    split_by_whitespace: bool = True
    split_digits: bool = False
    meta_pieces: tuple[str, ...] = ("<unk>", "<s>", "</s>")


@dataclass
class Result:
    pieces: list[tuple[str, float]]  # the final pieces (meta pieces not included), in id order
    rounds: list[list[tuple[str, float]]] = field(default_factory=list)  # pieces after each EM
    # round: the seeds, the pieces after each round's EM iterations, each round's candidates'
    # losses (piece -> float32 loss): what the trainer's pruned table must reflect
    seeds: list[tuple[str, float]] = field(default_factory=list)
    em_rounds: list[list[tuple[str, float]]] = field(default_factory=list)
    losses: list[dict[str, float]] = field(default_factory=list)


def normalize_identity(line: str) -> str:
    """SentencePiece's Normalizer with `normalization_rule_name=identity` and its defaults
    (add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces): only U+0020 is a space."""
    words = [w for w in line.split(" ") if w]
    # the escaped text loses every trailing WS, those of the line included
    return "" if not words else (WS + WS.join(words)).rstrip(WS)


def script(c: int) -> int:
    i = bisect.bisect_right(_STARTS, c) - 1
    if i >= 0 and SCRIPT_RANGES[i][0] <= c <= SCRIPT_RANGES[i][1]:
        return SCRIPT_RANGES[i][2]
    return 0  # Common


def is_decimal(c: int) -> bool:
    return 0x30 <= c <= 0x39 or 0xFF10 <= c <= 0xFF19


def is_valid_piece(piece: str, opts: Options) -> bool:
    """TrainerInterface::IsValidSentencePiece (prefix whitespace, no whitespace-only pieces)."""
    if not piece or len(piece) > opts.max_sentencepiece_length:
        return False
    prev = _ANY
    for pos, ch in enumerate(piece):
        c = ord(ch)
        if ch in (UNK_CHAR, BOUNDARY_CHAR, " ") or c == 0:
            return False
        if not (c < 0xD800 or 0xE000 <= c <= 0x10FFFF):
            return False
        if ch == WS:
            if (opts.split_by_whitespace and pos > 0) or (
                    not opts.split_by_whitespace and pos > 0 and pos == len(piece) - 1):
                return False
            continue
        s = script(c)
        if s in (_HIRAGANA, _KATAKANA) or c == 0x30FC:
            s = _HAN
        elif s == _INHERITED:
            s = prev
        if not opts.split_by_number and is_decimal(c):
            s = _ANY
        if opts.split_digits and is_decimal(c) and len(piece) > 1:
            return False
        if opts.split_by_unicode_script and s != _ANY and prev != _ANY and prev != s:
            return False
        prev = s
    return True


def sorted_desc(items):
    """SentencePiece's Sorted(): value descending, then key ascending (strings by UTF-8 bytes)."""
    def key(kv):
        k = kv[0]
        return k.encode("utf-8") if isinstance(k, str) else k
    by_key = sorted(items, key=key)
    return sorted(by_key, key=lambda kv: kv[1], reverse=True)


# --- loading (TrainerInterface::LoadSentences) ----------------------------------------------

def replace_meta_pieces(text: str, meta: tuple[str, ...]) -> str:
    """SentencePiece's `PrefixMatcher::GlobalReplace`: left to right, the longest meta piece
    starting at each position becomes BOUNDARY_CHAR; other characters are kept."""
    out = []
    i = 0
    while i < len(text):
        found = max((m for m in meta if text.startswith(m, i)), key=len, default=None)
        if found is None:
            out.append(text[i])
            i += 1
        else:
            out.append(BOUNDARY_CHAR)
            i += len(found)
    return "".join(out)


def load_sentences(lines: list[str], opts: Options, normalize=normalize_identity):
    """The normalized sentences (with count 1 each, in SentencePiece's order) and the required
    characters {char: count}; characters outside them replaced by UNK_CHAR."""
    sentences = []
    for line in lines:
        if not line or len(line.encode("utf-8")) > opts.max_sentence_length or UNK_CHAR in line:
            continue
        sentences.append([line, 1])
    for s in sentences:
        s[0] = replace_meta_pieces(normalize(s[0]), opts.meta_pieces)
    # Empty sentences are removed by swapping the last one in (the order matters to the seeds).
    i = 0
    while i < len(sentences):
        if not sentences[i][0]:
            sentences[i], sentences[-1] = sentences[-1], sentences[i]
            sentences.pop()
        else:
            i += 1
    counts: dict[str, int] = {}
    total = 0
    for w, n in sentences:
        for ch in w:
            c = ord(ch)
            if not (c < 0xD800 or 0xE000 <= c <= 0x10FFFF) or c == 0 or ch == " ":
                continue
            counts[ch] = counts.get(ch, 0) + n
            total += n
    required: dict[str, int] = {}
    accumulated = 0
    for ch, n in sorted_desc(counts.items()):
        coverage = f32(1.0 * accumulated / total)
        if coverage >= f32(opts.character_coverage):
            break
        accumulated += n
        if ch == BOUNDARY_CHAR:
            continue
        required[ch] = n
    for s in sentences:
        s[0] = "".join(ch if ch in required else UNK_CHAR for ch in s[0])
    if len(required) + len(opts.meta_pieces) > opts.vocab_size:
        raise ValueError("Vocabulary size is smaller than required_chars")
    return [(w, n) for w, n in sentences], required


# --- seeds (MakeSeedSentencePiecesFromCorpus) ------------------------------------------------

def suffix_array(t: bytes) -> list[int]:
    """The suffix array of t (a proper prefix sorts first), by prefix doubling."""
    n = len(t)
    rank = list(t)
    sa = list(range(n))
    k = 1
    while n:
        key = [(rank[i], rank[i + k] if i + k < n else -1) for i in range(n)]
        sa.sort(key=key.__getitem__)
        new = [0] * n
        for j in range(1, n):
            new[sa[j]] = new[sa[j - 1]] + (key[sa[j]] != key[sa[j - 1]])
        rank = new
        if rank[sa[-1]] == n - 1:
            break
        k *= 2
    return sa


def lcp_intervals(t: bytes, sa: list[int]) -> list[tuple[int, int, int]]:
    """The LCP intervals (l, r, depth), r inclusive, depth > 0, in the order SentencePiece's
    stack traversal pops them (post-order)."""
    n = len(t)
    rank = [0] * n
    for i, s in enumerate(sa):
        rank[s] = i
    lcp = [0] * n  # lcp[i]: common prefix of the suffixes sa[i-1] and sa[i] (Kasai)
    h = 0
    for i in range(n):
        if rank[i] > 0:
            j = sa[rank[i] - 1]
            while i + h < n and j + h < n and t[i + h] == t[j + h]:
                h += 1
            lcp[rank[i]] = h
            if h > 0:
                h -= 1
        else:
            h = 0
    out = []
    stack = [(0, 0)]  # (l, depth)
    for i in range(1, n + 1):
        lcp_val = lcp[i] if i < n else 0
        last_l = i - 1
        while lcp_val < stack[-1][1]:
            top_l, depth = stack.pop()
            last_l = top_l
            out.append((top_l, i - 1, depth))
            if lcp_val > stack[-1][1]:
                stack.append((top_l, lcp_val))
        if lcp_val > stack[-1][1]:
            stack.append((last_l, lcp_val))
    return out


def seed_pieces(sentences, opts: Options) -> list[tuple[str, float]]:
    all_chars: dict[str, int] = {}
    for w, n in sentences:
        for ch in w:
            if ch not in (UNK_CHAR, BOUNDARY_CHAR):
                all_chars[ch] = all_chars.get(ch, 0) + n
    seeds: list[tuple[str, float]] = [(ch, f32(n)) for ch, n in sorted_desc(all_chars.items())]
    # Every sentence count times, each ended by a NUL byte: one byte string (one "chunk").
    text = b"".join((w.encode("utf-8") + b"\0") * n for w, n in sentences)
    sa = suffix_array(text)
    found: dict[bytes, int] = {}
    for left, right, depth in lcp_intervals(text, sa):
        freq = right - left + 1
        if depth <= 1 or freq < 2:
            continue
        offset = sa[left]
        if offset + depth > len(text):
            continue
        # the piece must start and end on a UTF-8 character boundary
        if (text[offset] & 0xC0) == 0x80 or (
                offset + depth != len(text) and (text[offset + depth] & 0xC0) == 0x80):
            continue
        piece = text[offset:offset + depth].rstrip(b"\0")
        if b"\0" in piece:
            continue
        chars = piece.decode("utf-8")
        if len(chars) <= 1 or len(chars) > opts.max_sentencepiece_length:
            continue
        if not is_valid_piece(chars, opts):
            continue
        found[piece] = found.get(piece, 0) + freq  # the same piece from several intervals adds up
    items = [(piece, f32(f32(freq) * f32(len(piece.decode("utf-8")))))
             for piece, freq in found.items() if freq >= 2]
    # score descending, then longer (in bytes) first, then the bytes ascending
    items.sort(key=lambda x: (-x[1], -len(x[0]), x[0]))
    for piece, score in items[:opts.seed_sentencepiece_size]:
        seeds.append((piece.decode("utf-8"), score))
    return to_log_prob(seeds)


def to_log_prob(pieces: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """ToLogProb: a double sum of the float values, their log probabilities as floats."""
    total = 0.0
    for _, v in pieces:
        total += v
    logsum = math.log(total)
    return [(p, f32(math.log(v) - logsum)) for p, v in pieces]


def split_by_whitespace(sentences) -> list[tuple[str, int]]:
    """SplitSentencesByWhitespace: words start at each WS; (word, count) Sorted()."""
    tokens: dict[str, int] = {}
    for s, n in sentences:
        start = 0
        for i in range(1, len(s) + 1):
            if i == len(s) or s[i] == WS:
                w = s[start:i]
                tokens[w] = tokens.get(w, 0) + n
                start = i
    return sorted_desc(tokens.items())


# --- the lattice (unigram_model.cc) -----------------------------------------------------------

class Node:
    __slots__ = ("node_id", "pos", "length", "id", "score", "prev", "backtrace")

    def __init__(self, node_id, pos, length, id_, score):
        self.node_id, self.pos, self.length, self.id, self.score = node_id, pos, length, id_, score
        self.prev = None
        self.backtrace = 0.0


class Model:
    """TrainerModel: the pieces (id = position), a trie by dictionary, min_score, unk id 0."""

    def __init__(self, pieces: list[tuple[str, float]]):
        self.pieces = pieces
        self.index = {p: i for i, (p, _) in enumerate(pieces)}
        self.max_len = max(len(p) for p, _ in pieces)
        self.min_score = min(s for _, s in pieces)

    def lattice(self, w: str):
        """SetSentence + PopulateNodes: begin_nodes, end_nodes and all nodes by node_id."""
        n = len(w)
        begin = [[] for _ in range(n + 1)]
        end = [[] for _ in range(n + 1)]
        nodes = []
        bos = Node(0, 0, 0, -1, 0.0)
        eos = Node(1, n, 0, -1, 0.0)
        nodes += [bos, eos]
        end[0].append(bos)
        begin[n].append(eos)
        unk_score = f32(self.min_score - 10.0)
        for b in range(n):
            has_single = False
            # commonPrefixSearch returns the matches by increasing length
            for length in range(1, min(self.max_len, n - b) + 1):
                i = self.index.get(w[b:b + length])
                if i is None:
                    continue
                node = Node(len(nodes), b, length, i, self.pieces[i][1])
                nodes.append(node)
                begin[b].append(node)
                end[b + length].append(node)
                has_single = has_single or length == 1
            if not has_single:
                node = Node(len(nodes), b, 1, 0, unk_score)  # unk_id_ is 0 in TrainerModel
                nodes.append(node)
                begin[b].append(node)
                end[b + 1].append(node)
        return begin, end, nodes


def log_sum_exp(x: float, y: float, init: bool) -> float:
    if init:
        return y
    vmin, vmax = min(x, y), max(x, y)
    if vmax > f32(vmin + 50.0):
        return vmax
    return f32(vmax + math.log1p(math.exp(f32(vmin - vmax))))


def viterbi(begin, end, n) -> list[Node]:
    for pos in range(n + 1):
        for r in begin[pos]:
            best, best_score = None, 0.0
            for left in end[pos]:
                score = f32(left.backtrace + r.score)
                if best is None or score > best_score:
                    best, best_score = left, score
            r.prev, r.backtrace = best, best_score
    path = []
    node = begin[n][0].prev
    while node.prev is not None:
        path.append(node)
        node = node.prev
    return path[::-1]


def populate_marginal(begin, end, nodes, n, freq: float, expected: list[float]) -> float:
    alpha = [0.0] * len(nodes)
    for pos in range(n + 1):
        for r in begin[pos]:
            for left in end[pos]:
                step = f32(left.score + alpha[left.node_id])
                alpha[r.node_id] = log_sum_exp(alpha[r.node_id], step, left is end[pos][0])
    beta = [0.0] * len(nodes)
    for pos in range(n, -1, -1):
        for left in end[pos]:
            for r in begin[pos]:
                beta[left.node_id] = log_sum_exp(beta[left.node_id], f32(r.score + beta[r.node_id]),
                                                 r is begin[pos][0])
    z = alpha[begin[n][0].node_id]
    for pos in range(n):
        for node in begin[pos]:
            if node.id >= 0:
                x = f32(f32(f32(alpha[node.node_id] + node.score) + beta[node.node_id]) - z)
                expected[node.id] = f32(expected[node.id] + freq * math.exp(x))
    return f32(freq * z)


def two_best(begin, end, n) -> list[list[Node]]:
    """Lattice::NBest(2): the two best paths, a path's score summed from its right end (gx)."""
    # best[pos]: up to two (score, path) from pos to the end, score = s_first + (... + s_last)
    best: list[list[tuple[float, list[Node]]]] = [[] for _ in range(n + 1)]
    best[n] = [(0.0, [])]
    for pos in range(n - 1, -1, -1):
        cands = []
        for node in begin[pos]:
            for score, path in best[pos + node.length]:
                cands.append((f32(node.score + score), [node] + path))
        cands.sort(key=lambda c: -c[0])  # stable: ties keep insertion order
        best[pos] = cands[:2]
    return [path for _, path in best[0]]


# --- EM and pruning (unigram_model_trainer.cc) --------------------------------------------------

def digamma(x: float) -> float:
    result = 0.0
    while x < 7:
        result -= 1 / x
        x += 1
    x -= 1.0 / 2.0
    xx = 1.0 / x
    xx2 = xx * xx
    xx4 = xx2 * xx2
    result += (math.log(x) + (1.0 / 24.0) * xx2 - (7.0 / 960.0) * xx4
               + (31.0 / 8064.0) * xx4 * xx2 - (127.0 / 30720.0) * xx4 * xx4)
    return result


def run_e_step(model: Model, words, threads: int) -> list[float]:
    expected = [[0.0] * len(model.pieces) for _ in range(threads)]
    for t in range(threads):
        for i in range(t, len(words), threads):
            w, count = words[i]
            begin, end, nodes = model.lattice(w)
            populate_marginal(begin, end, nodes, len(w), f32(count), expected[t])
    for t in range(1, threads):
        expected[0] = [f32(a + b) for a, b in zip(expected[0], expected[t])]
    return expected[0]


def run_m_step(model: Model, expected: list[float]) -> list[tuple[str, float]]:
    kept = []
    total = 0.0
    for (piece, _), freq in zip(model.pieces, expected):
        if freq < 0.5:
            continue
        kept.append((piece, freq))
        total = f32(total + freq)
    logsum = f32(digamma(total))
    return [(p, f32(digamma(v) - logsum)) for p, v in kept]


def prune(model: Model, words, desired: int, opts: Options,
          losses: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """PruneSentencePieces; `losses`, when given, receives every candidate's loss."""
    pieces = model.pieces
    size = len(pieces)
    always_keep = [True] * size
    alternatives: list[list[int]] = [[] for _ in range(size)]
    for i, (piece, _) in enumerate(pieces):
        begin, end, _nodes = model.lattice(piece)
        nbests = two_best(begin, end, len(piece))
        if len(nbests) == 1:
            always_keep[i] = True
        elif len(nbests[0]) >= 2:
            always_keep[i] = False
        elif len(nbests[0]) == 1:
            always_keep[i] = True
            alternatives[i] = [node.id for node in nbests[1]]
    threads = opts.num_threads
    freqs = [[0.0] * size for _ in range(threads)]
    for t in range(threads):
        for i in range(t, len(words), threads):
            w, count = words[i]
            begin, end, _nodes = model.lattice(w)
            for node in viterbi(begin, end, len(w)):
                if node.id >= 0:
                    freqs[t][node.id] = f32(freqs[t][node.id] + f32(count))
    freq = [0.0] * size
    for t in range(threads):
        for i in range(size):
            freq[i] = f32(freq[i] + freqs[t][i])
    total = 0.0
    for v in freq:  # std::accumulate with a double 0.0: a double sum
        total += v
    total = f32(total)
    logsum = f32(math.log(total))
    candidates = []
    new_pieces = []
    for i in range(size):
        if freq[i] == 0 or not always_keep[i]:
            continue
        if not alternatives[i]:
            new_pieces.append(pieces[i])
            continue
        logprob_sp = f32(math.log(freq[i]) - logsum)
        logsum_alt = f32(math.log(f32(total + f32(freq[i] * f32(len(alternatives[i]) - 1)))))
        logprob_alt = 0.0
        for a in alternatives[i]:
            # float += double: the log difference is not rounded before the sum
            logprob_alt = f32(logprob_alt + (math.log(f32(freq[a] + freq[i])) - logsum_alt))
        big_f = f32(freq[i] / total)  # the piece's share of the tokens
        loss = f32(big_f * f32(logprob_sp - logprob_alt))
        candidates.append((i, loss))
        if losses is not None:
            losses[pieces[i][0]] = loss
    pruned_size = max(desired, int(f32(f32(opts.shrinking_factor) * f32(size))))
    for i, _ in sorted(candidates, key=lambda c: (-c[1], c[0])):
        if len(new_pieces) == pruned_size:
            break
        new_pieces.append(pieces[i])
    return new_pieces


def prune_unreachable(model: Model) -> list[tuple[str, float]]:
    """PruneUnreachableSentencePieces: drop a piece whose own lattice has a path, without the
    piece's own node, that scores strictly higher than the piece."""
    kept = []
    for i, (piece, score) in enumerate(model.pieces):
        begin, end, _nodes = model.lattice(piece)
        n = len(piece)
        self_node = next((node for node in begin[0] if node.id == i and node.length == n), None)
        if self_node is None:
            continue
        self_node.score = -math.inf
        path = viterbi(begin, end, n)
        if path and begin[n][0].backtrace > score:
            continue
        kept.append((piece, score))
    return kept


def finalize(model: Model, required: dict[str, int], opts: Options) -> list[tuple[str, float]]:
    sp = dict(model.pieces)
    final: dict[str, float] = {}
    penalty = 0.0
    for ch, _ in sorted(required.items(), key=lambda kv: (-kv[1], ord(kv[0]))):
        if ch in sp:
            final[ch] = sp[ch]
        else:
            final[ch] = f32(model.min_score + penalty)
            penalty = f32(penalty + f32(0.0001))
    size = opts.vocab_size - len(opts.meta_pieces)
    for piece, score in sorted_desc(model.pieces):
        if piece in final:
            continue
        if len(final) == size:
            break
        final[piece] = score
    return sorted_desc(final.items())


def train(lines: list[str], opts: Options, normalize=normalize_identity) -> Result:
    sentences, required = load_sentences(lines, opts, normalize)
    model = Model(seed_pieces(sentences, opts))
    seeds = list(model.pieces)
    words = split_by_whitespace(sentences) if opts.split_by_whitespace else sentences
    desired = int(opts.vocab_size * 1.1)
    rounds, em_rounds, losses = [], [], []
    while True:
        for _ in range(opts.num_sub_iterations):
            expected = run_e_step(model, words, opts.num_threads)
            model = Model(run_m_step(model, expected))
        em_rounds.append(list(model.pieces))
        losses.append({})
        model = Model(prune(model, words, desired, opts, losses[-1]))
        rounds.append(list(model.pieces))
        if len(model.pieces) <= desired:
            break
    model = Model(prune_unreachable(model))
    return Result(finalize(model, required, opts), rounds, seeds, em_rounds, losses)
