"""Stages 3-5: initial symbols laid out flat (`symbols`, on `tokcolumnar.layout`), the shared
merge-pass kernels (`passes`), the BPE and WordPiece merge loops (`bpe`, `wordpiece`), the
result tables (`tables`), the Polars engine (`polars_engine`) and the pipeline that runs an
engine end to end (`pipeline`)."""
