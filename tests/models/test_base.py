"""`vocab_from_hf`: a vocabulary is checked by C loops when it is the usual one, and by a loop
over its tokens otherwise; both ways give the same vocabulary or the same refusal."""

from __future__ import annotations

import enum

import pytest

from tokcolumnar.errors import TokcolumnarValueError
from tokcolumnar.hfjson import HFObject
from tokcolumnar.models.base import MAX_ID_GAP, U32_MAX, vocab_from_hf


def _read(vocab: dict) -> dict[str, int]:
    return vocab_from_hf(HFObject({"vocab": vocab}, "model BPE"))


class Id(enum.IntEnum):
    TWO = 2


@pytest.mark.parametrize("vocab", [
    {}, {"a": 0}, {"a": 1, "b": 0, "c": 5}, {"a": 0, "b": MAX_ID_GAP + 1},  # (a gap: allowed)
    {"a": 0, "b": 1, "c": Id.TWO},  # an int subclass other than bool: accepted (the loop)
])
def test_a_valid_vocabulary_is_kept_as_a_copy(vocab):
    got = _read(vocab)
    assert got == vocab and got is not vocab


@pytest.mark.parametrize("vocab, message", [
    ({"a": 0, "b": True}, "vocab: the id of 'b' must be an integer, got a boolean"),
    ({"a": 0.0}, "vocab: the id of 'a' must be an integer, got a number"),
    ({"a": 0, "b": "1"}, "vocab: the id of 'b' must be an integer, got a string"),
    ({"a": 0, "b": -1}, f"vocab: the id of 'b' is -1; ids go from 0 to {U32_MAX}"),
    ({"a": 0, "b": U32_MAX + 1},
     f"vocab: the id of 'b' is {U32_MAX + 1}; ids go from 0 to {U32_MAX}"),
    ({"a": 0, "b": 1 << 70}, f"vocab: the id of 'b' is {1 << 70}; ids go from 0 to {U32_MAX}"),
    ({"a": 0, "b": 1, "c": 0}, "vocab: id 0 is given to both 'a' and 'c'"),
    ({"a": 0, "b": MAX_ID_GAP + 2}, f"vocab: ids go up to {MAX_ID_GAP + 2} for 2 tokens "
                                    "(too sparse)"),
    # the first offending token in the vocabulary's order, whichever the fault
    ({"a": -1, "b": True}, f"vocab: the id of 'a' is -1; ids go from 0 to {U32_MAX}"),
])
def test_a_bad_vocabulary_is_refused_naming_the_first_fault(vocab, message):
    with pytest.raises(TokcolumnarValueError) as e:
        _read(vocab)
    assert str(e.value) == f"model BPE: {message}"
