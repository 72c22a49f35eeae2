"""The one place the tests find the real corpora.

They live in `$TOKCOLUMNAR_CORPORA` (default: `../shared/corpora` from the project root). A
test that needs an absent corpus is skipped with the path it looked for — unless
`TOKCOLUMNAR_REQUIRE_CORPORA=1` (CI sets it), where the absence is a failure: a parity run that
silently skipped everything must not pass. Tests reading corpora carry the `corpus` marker
(checked when they call `corpus()`, see tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import markers
from tests.support.markers import heavy, tiered

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
PRIMER = DATA / "tokenizers_primer.txt"  # a small text file inside the repository
MISSING = "<missing>"  # the parameter when no corpus file can be listed


def corpora_dir() -> Path:
    return Path(os.environ.get("TOKCOLUMNAR_CORPORA") or ROOT.parent / "shared" / "corpora")


def required() -> bool:
    return os.environ.get("TOKCOLUMNAR_REQUIRE_CORPORA", "") not in ("", "0")


def absent(what: str) -> None:
    """Skip (or, with TOKCOLUMNAR_REQUIRE_CORPORA=1, fail) the running test."""
    reason = f"{what} not available (set TOKCOLUMNAR_CORPORA; looked in {corpora_dir()})"
    if required():
        pytest.fail(f"{reason}, and TOKCOLUMNAR_REQUIRE_CORPORA is set", pytrace=False)
    pytest.skip(reason)


def corpus(rel: str) -> Path:
    """The path of a corpus file (e.g. "small/en_botchan.txt"), or skip/fail the test."""
    markers.require("corpus", f"reads the corpus {rel}")
    if MISSING in rel:
        absent(f"corpus directory {corpora_dir() / Path(rel).parent}")
    p = corpora_dir() / rel
    if not p.is_file():
        absent(f"corpus {p}")
    return p


def listed(folder: str) -> list[str]:
    """The names of the .txt corpora in a folder, for parametrizing ([MISSING] when there are
    none, so that the test runs and reports the absence)."""
    d = corpora_dir() / folder
    return sorted(p.name for p in d.glob("*.txt")) or [MISSING]


SMALL = listed("small")
MEDIUM = listed("medium")


#: The small corpora of the full run's secondary checks (with the fast tier's one): Arabic with
#: its diacritics, Japanese, the 14-script UDHR (Cyrillic, Greek, Devanagari, ...) and
#: Chinese. The other small corpora (three English, Russian) run them with TOKCOLUMNAR_SLOW=1.
SCRIPTS = ("ar_tashkeela_plain_300k.txt", "ja_wagahai_300k.txt", "udhr_multiscript.txt",
           "zh_hongloumeng_300k.txt")


def small_scripts(fast: str) -> list[Any]:
    """SMALL for `parametrize` in three tiers (`markers.heavy`): `fast` in the fast tier, it and
    `SCRIPTS` in the full run, every small corpus with TOKCOLUMNAR_SLOW=1 — for the checks
    that each training or encoding path is exact beyond the primary parity tests (those run
    on every small corpus: `small_tiered`)."""
    keep = fast if fast in SMALL else SMALL[0]
    return heavy(SMALL, full=lambda name: name in SCRIPTS, fast=lambda name: name == keep)


def small_tiered(fast: str) -> list[Any]:
    """SMALL for `parametrize`, with every corpus but `fast` marked slow: the fast tier checks
    one real corpus (the first one there is if `fast` is not), the full run all of them."""
    keep = fast if fast in SMALL else SMALL[0]
    return tiered(SMALL, lambda name: name == keep)
