"""The line cuts: each pre-tokenizer names a kind of cut (text/), the reader holds each kind's
rule (corpus/line_cuts.py)."""

from __future__ import annotations

import re

import pytest

from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus.line_cuts import RULES, line_cut
from tokcolumnar.text.pretokenizers import LINE_CUT_KINDS, PRETOKENIZER_NAMES


def test_every_kind_has_one_rule():
    assert set(RULES) == set(LINE_CUT_KINDS)
    assert len(set(LINE_CUT_KINDS)) == len(LINE_CUT_KINDS)
    for rule in RULES.values():
        re.compile(rule.pattern)


@pytest.mark.parametrize("name", PRETOKENIZER_NAMES)
def test_every_pretokenizer_names_a_known_kind(name):
    pre = TrainConfig(pre_tokenizer=name).text_components()[1]
    kind = pre.line_cut()
    assert kind is None or kind in LINE_CUT_KINDS
    assert line_cut(pre) is (RULES[kind] if kind is not None else None)
    assert line_cut(None) is None
