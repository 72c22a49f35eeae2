"""tiktoken's format for a byte-level BPE: `tokenizer.tiktoken` (one `base64(token bytes) rank`
line per token, as `tiktoken.load.load_tiktoken_bpe` reads it), the split pattern and the
special tokens (`run.json`'s `tiktoken` record), and a `tiktoken.Encoding` of a tokenizer
(`Tokenizer.to_tiktoken`).

A token's rank is its id. tiktoken merges, within a piece, the adjacent pair whose joined bytes
have the lowest rank; HF merges the pair with the lowest merge rank. A trained byte-level BPE
numbers the 256 bytes first and each merge's token after the tokens it joins, in merge order,
so the two orders agree (checked against tiktoken on the corpora by tests/test_tiktoken.py).
tiktoken is optional: only `to_tiktoken` imports it."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Protocol

from .errors import TokcolumnarValueError
from .models import BPEModel
from .text.bytelevel import BYTES_TO_UNICODE, token_bytes
from .text.patterns import GPT2
from .text.pretokenizers import ByteLevel, PatternByteLevel, Sequence, Split


class Tokenizer(Protocol):
    """What this module reads of a `tokenizer.Tokenizer` (which imports this module: the
    protocol keeps the two from knowing each other both ways)."""

    model: Any
    pre_tokenizer: Any
    normalizer: Any
    added_tokens: list[Any]

TIKTOKEN_FILE = "tokenizer.tiktoken"


def tiktoken_pattern(tokenizer: Tokenizer) -> str | None:
    """The split pattern tiktoken needs for this tokenizer's pieces, None when tiktoken cannot
    reproduce its pre-tokenization (not a byte-level BPE: a prefix space, another
    pre-tokenizer or model). tiktoken has no normalizer: a tokenizer with one (Qwen2's NFC)
    gives tiktoken's ids on normalized text (`tiktoken_record` names the normalizer)."""
    pre = tokenizer.pre_tokenizer
    if not isinstance(tokenizer.model, BPEModel):
        return None
    if isinstance(pre, PatternByteLevel):
        return pre.pattern.regex
    if type(pre) is ByteLevel and pre.use_regex and not pre.add_prefix_space:
        return GPT2
    # any other regex, as HF writes it: Split(Regex(p), "isolated") + ByteLevel(use_regex=False)
    if (isinstance(pre, Sequence) and len(pre.pretokenizers) == 2
            and isinstance(split := pre.pretokenizers[0], Split) and split.regex
            and split.behavior == "isolated" and not split.invert
            and type(byte_level := pre.pretokenizers[1]) is ByteLevel
            and not byte_level.use_regex and not byte_level.add_prefix_space):
        return split.pattern
    return None


def tiktoken_ranks(tokenizer: Tokenizer) -> dict[bytes, int]:
    """Each token's bytes -> its id (the rank), special tokens aside. Raises when a byte is
    missing (tiktoken needs all 256) or two tokens have the same bytes."""
    special = {t.content for t in tokenizer.added_tokens}
    ranks: dict[bytes, int] = {}
    for token, i in tokenizer.model.vocab.items():
        if token in special:
            continue
        b = token_bytes(token)
        if b in ranks:
            raise TokcolumnarValueError(f"tokens {ranks[b]} and {i} have the same bytes {b!r}")
        ranks[b] = i
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TokcolumnarValueError(
            f"{len(missing)} of the 256 bytes have no token (e.g. {bytes([missing[0]])!r} = "
            f"{BYTES_TO_UNICODE[missing[0]]!r}); tiktoken needs them all (train with the 256 "
            "bytes as initial alphabet, as --preset gpt2 does)")
    return ranks


def tiktoken_text(ranks: dict[bytes, int]) -> str:
    """`tokenizer.tiktoken`'s text: `base64 rank` lines by rank."""
    encode = binascii.b2a_base64  # (what `base64.b64encode` calls, without its checks)
    return "".join(f"{encode(b, newline=False).decode('ascii')} {r}\n"
                   for b, r in sorted(ranks.items(), key=lambda kv: kv[1]))


def special_tokens(tokenizer: Tokenizer) -> dict[str, int]:
    return {t.content: t.id for t in tokenizer.added_tokens if t.special}


def tiktoken_record(tokenizer: Tokenizer) -> dict[str, Any] | None:
    """What a tiktoken user needs besides `tokenizer.tiktoken` (run.json's `tiktoken`):
    the pattern and the special tokens; None when tiktoken cannot run this tokenizer."""
    pattern = tiktoken_pattern(tokenizer)
    if pattern is None:
        return None
    record = {"file": TIKTOKEN_FILE, "pat_str": pattern,
              "special_tokens": special_tokens(tokenizer)}
    if tokenizer.normalizer is not None:  # tiktoken has none: normalize the text first
        record["normalize_first"] = tokenizer.normalizer.to_hf()
    return record


def read_tiktoken(path: str) -> dict[bytes, int]:
    """A `tokenizer.tiktoken` file's ranks (tiktoken's `load_tiktoken_bpe`, without tiktoken):
    refused with one line naming the problem when a line is not `base64 rank`."""
    ranks: dict[bytes, int] = {}
    try:
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                parts = line.split()
                try:
                    token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
                    if len(parts) != 2:
                        raise ValueError
                except (ValueError, IndexError):
                    raise TokcolumnarValueError(f"{path}: line {n} is not `base64 rank`: "
                                                f"{line[:60]!r}") from None
                ranks[token] = rank
    except OSError as e:
        raise TokcolumnarValueError(f"cannot read {path}: {e.strerror or e}") from None
    if not ranks:
        raise TokcolumnarValueError(f"{path} holds no tokens")
    return ranks


def to_tiktoken(tokenizer: Tokenizer, name: str = "tokcolumnar") -> Any:
    """A `tiktoken.Encoding` with this tokenizer's ranks, pattern and special tokens (needs
    the optional `tiktoken` package). tiktoken has no normalizer: with one (Qwen2's NFC), give
    it normalized text."""
    pattern = tiktoken_pattern(tokenizer)
    if pattern is None:
        raise TokcolumnarValueError("tiktoken runs byte-level BPE only (ByteLevel without a "
                                    "prefix space, a named pattern's split, or a regex's "
                                    "Split + ByteLevel(use_regex=False))")
    try:
        import tiktoken
    except ImportError:
        raise TokcolumnarValueError("to_tiktoken needs the tiktoken package "
                                    "(pip install tiktoken)") from None
    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=tiktoken_ranks(tokenizer),
                             special_tokens=special_tokens(tokenizer))


def merges_of_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges of a tiktoken vocabulary, in an order HF's BPE reproduces tiktoken with:
    every split of each token into two tokens, by the token's rank (tiktoken merges the
    adjacent pair whose joined bytes rank lowest, whichever two tokens they were; splits of
    one token never compete, as two of them cannot be adjacent pairs at once)."""
    merges: list[tuple[int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, left, right))
    merges.sort(key=lambda m: (m[0], ranks[m[1]], ranks[m[2]]))
    return [(a, b) for _, a, b in merges]


def parse_special_tokens(items: list[str], ranks: dict[bytes, int]) -> dict[str, int]:
    """`--special-tokens` for a tiktoken vocabulary: `NAME=ID` items, or names, numbered
    after the highest rank in order (as tiktoken's encodings number theirs)."""
    out: dict[str, int] = {}
    nxt = max(ranks.values()) + 1
    for item in items:
        name, eq, value = item.rpartition("=")
        if eq and name and value.isdigit():
            out[name] = int(value)
        else:
            out[item] = nxt
            nxt += 1
    taken = {r: b for b, r in ranks.items()}
    for name, i in out.items():
        if i in taken:
            raise TokcolumnarValueError(f"special token {name!r}: id {i} is the rank of "
                                        f"{taken[i]!r}")
    return out


def _encode_below(ranks: dict[bytes, int], token: bytes, limit: int) -> list[bytes]:
    """`token`'s bytes encoded as tiktoken encodes them with the ranks below `limit` only:
    the adjacent pair whose joined bytes rank lowest is joined first (the leftmost on a tie)."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best, at = limit, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], limit)
            if r < best:
                best, at = r, i
        if at < 0:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def trained_merges_of_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes, bytes]]:
    """The merges a BPE training made, one per token of two bytes or more, in rank order
    (`left`, `right`, token): a token's merge joins the two tokens its own bytes encode to
    with the lower ranks (as the merges are applied in rank order, each word's symbols at the
    step that made a token are the encoding of their bytes by the earlier tokens). Unlike
    `merges_of_ranks`, which lists every split for encoding, this is the training's list (a
    trained output's `tokenizer.tiktoken` gives its merges back: tests/training/
    test_extend.py). Raises when a token is no such join: not a BPE vocabulary."""
    merges: list[tuple[bytes, bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = _encode_below(ranks, token, rank)
        if len(parts) != 2:
            raise TokcolumnarValueError(
                f"rank {rank} ({token!r}) is not the join of two tokens of lower rank (its "
                f"bytes encode to {len(parts)} tokens below it), as each token a BPE training "
                "makes is: not a BPE vocabulary")
        merges.append((parts[0], parts[1], token))
    return merges
