"""Generate tokcolumnar/data/nmt_nfkc.bin: SentencePiece's `nmt_nfkc` normalization rule as the
precompiled char map `spm_train` writes into every model it trains with the default rule
(`NormalizerSpec.precompiled_charsmap`: a darts-clone trie of source strings and the blob of
their replacements; HF's `Precompiled` normalizer reads the same bytes).

The bytes are data, taken from a model the installed `sentencepiece` trains (no SentencePiece
code is copied); `tokcolumnar.text.charsmap` decodes them. Usage:

    python scripts/gen_nmt_nfkc.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tokcolumnar" / "data" / "nmt_nfkc.bin"
sys.path.insert(0, str(ROOT))


def main() -> None:
    import sentencepiece as spm

    from tokcolumnar.models.sentencepiece_model import SentencePieceModel

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("a b c d e f g h\n" * 20, encoding="utf-8")
        prefix = str(Path(tmp) / "m")
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=prefix, vocab_size=12,
                                       normalization_rule_name="nmt_nfkc",
                                       minloglevel=2)
        model = SentencePieceModel.from_bytes(Path(prefix + ".model").read_bytes())
    spec = model.normalizer
    if spec.name != "nmt_nfkc" or not spec.precompiled_charsmap:
        raise SystemExit(f"unexpected normalizer in the trained model: {spec.name!r}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(spec.precompiled_charsmap)
    print(f"{OUT}: {len(spec.precompiled_charsmap)} bytes (sentencepiece {spm.__version__})")


if __name__ == "__main__":
    main()
