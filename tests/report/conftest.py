"""Tokenizers trained once per session for the report tests (small vocabularies on the small
corpora), the held-out texts they are measured on, and the UDHR split into its translations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpora import corpus
from tokcolumnar import train

# name -> (training corpus, options)
TRAINED = {
    "bpe": ("small/en_botchan.txt", {"vocab_size": 1200}),
    "gpt2": ("small/en_botchan.txt", {"vocab_size": 1200, "preset": "gpt2"}),
    "bert": ("small/en_botchan.txt", {"vocab_size": 1200, "preset": "bert",
                                      "wordpiece_scoring": "frequency"}),
    "bpe_unk": ("small/en_botchan.txt", {"vocab_size": 1200, "unk_token": "[UNK]",
                                         "special_tokens": ["[UNK]"]}),
    "multi": ("small/ru_pushkin_300k.txt", {"vocab_size": 2000, "preset": "gpt2"}),
}


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every tokenizer of TRAINED, trained on first use (cached for the session)."""
    return {}


@pytest.fixture
def tokdir(trained: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    def get(name: str) -> Path:
        if name not in trained:
            rel, options = TRAINED[name]
            out = tmp_path_factory.mktemp("tok") / name
            train([str(corpus(rel))], out_dir=out, show_progress=False, **options)
            trained[name] = out
        return trained[name]
    return get


def split_udhr(path: Path, into: Path) -> list[Path]:
    """udhr_multiscript.txt is 14 complete translations in a row; each starts with a title line
    that is not indented (every other non-empty line is). One file per translation."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() and not line[0].isspace()]
    out = []
    for n, (a, b) in enumerate(zip(starts, [*starts[1:], len(lines)])):
        p = into / f"udhr_{n:02d}.txt"
        p.write_text("".join(lines[a:b]), encoding="utf-8")
        out.append(p)
    return out
