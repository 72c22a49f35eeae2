"""Words as the metrics count them, whatever the tokenizer: the regex both `report.metrics`
(fertility) and `encode.stats` (--stats) count words with, so the two agree."""

from __future__ import annotations

# Scripts written without spaces: each of their characters (with its combining marks) is a word;
# every other maximal run of non-space characters is a word (tokka-bench's rule, without having
# to know the language; Hangul is written with spaces).
NO_SPACE = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
WORD_RE = rf"[{NO_SPACE}]\p{{M}}*|[^\s{NO_SPACE}]+"
