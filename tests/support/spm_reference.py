"""Train with the real SentencePiece (`sentencepiece` package, `spm_train`'s library) for the
Unigram parity tests: the pieces and scores of the model it writes."""

from __future__ import annotations

import tempfile
from pathlib import Path

META = 3  # <unk>, <s>, </s>: the pieces before the trained ones


def spm_unigram(lines: list[str], vocab_size: int, num_threads: int = 1,
                **options) -> list[tuple[str, float]]:
    """The trained pieces (meta pieces left out) with their float32 scores, in id order.
    `identity` normalization (the oracle's); `hard_vocab_limit=False` unless given, so that a
    tiny corpus with fewer possible pieces than `vocab_size` trains instead of failing."""
    import sentencepiece as spm

    options = {"normalization_rule_name": "identity", "hard_vocab_limit": False,
               "minloglevel": 2, **options}
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "input.txt"
        src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(Path(d) / "m"),
                                       vocab_size=vocab_size, model_type="unigram",
                                       num_threads=num_threads, **options)
        sp = spm.SentencePieceProcessor(model_file=str(Path(d) / "m.model"))
        head = META + (256 if options.get("byte_fallback") else 0)
        return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(head, sp.get_piece_size())]
