"""The text components, each a Polars expression over a column of strings, serialisable to and
from HF `tokenizer.json`: normalizers, pre-tokenizers (with GPT-2's byte-level table in
`bytelevel`), decoders and post-processors; the HF code point tables and regex translation they
rely on."""
