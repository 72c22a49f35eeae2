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


def spm_bpe_model(lines: list[str], vocab_size: int, path: Path, **options) -> Path:
    """`spm_train --model_type=bpe --byte_fallback` on `lines` (Llama 2's setup: no rule, extra
    whitespace kept), its model written to `path`."""
    import sentencepiece as spm

    options = {"normalization_rule_name": "identity", "remove_extra_whitespaces": False,
               "byte_fallback": True, "hard_vocab_limit": False, "minloglevel": 2, **options}
    src = path.with_suffix(".txt")
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(path.with_suffix("")),
                                   vocab_size=vocab_size, model_type="bpe", **options)
    return path.with_suffix(".model")


def hf_from_spm(model: Path):
    """HF's tokenizer of a SentencePiece model, by transformers' own conversion
    (`SpmConverter.build_tokenizer_from_spm_proto`: the merges of every pair of pieces ranked
    by score, `byte_fallback`, `fuse_unk`, the normalizer spec as HF steps). The ModelProto is
    read by our codec into the attributes the converter reads (the venv has no `protobuf`)."""
    from types import SimpleNamespace as NS

    from transformers.convert_slow_tokenizer import SpmConverter

    from tokcolumnar.models.sentencepiece_model import SentencePieceModel

    m = SentencePieceModel.from_bytes(model.read_bytes())
    n = m.normalizer
    proto = NS(pieces=[NS(piece=p.piece, score=p.score, type=p.type) for p in m.pieces],
               trainer_spec=NS(byte_fallback=m.byte_fallback, unk_piece="<unk>",
                               unk_id=m.unk_id, model_type=m.model_type),
               normalizer_spec=NS(precompiled_charsmap=n.precompiled_charsmap,
                                  add_dummy_prefix=n.add_dummy_prefix,
                                  remove_extra_whitespaces=n.remove_extra_whitespaces,
                                  escape_whitespaces=n.escape_whitespaces))
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    return SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)
