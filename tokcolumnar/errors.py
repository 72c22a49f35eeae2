"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations


class TokcolumnarError(Exception):
    """Bad input or settings. The CLI prints `tokcolumnar: error: <message>` and exits 2."""

    exit_code = 2


def word_too_long(size: str, max_word_chars: int) -> str:
    """The message for a pre-token over --max-word-chars (`size`: its length in characters,
    e.g. "12,345" or "more than 1,000,000"), the same from every place that finds one."""
    return (f"a pre-token of {size} characters exceeds --max-word-chars {max_word_chars:,} "
            "(a huge line without separators?); split the input, choose another pre-tokenizer, "
            "or raise the limit")
