"""Encoding datasets: inputs -> Parquet columns of token ids (`dataset`)."""

# The encode command's settings, here so that the CLI's parser reads them without loading
# Polars (dataset.py does).
OUTPUT_COLUMNS = ("ids", "n_tokens", "tokens", "word_ids", "type_ids", "attention_mask",
                  "offsets")
DEFAULT_COLUMNS = ("ids", "n_tokens")
PACK_COLUMNS = ("ids", "n_tokens")  # what a packed block has (--pack)
# a longer sequence is refused: memory stays bounded on one huge line (a single 8 MiB
# pre-token costs ~0.7 GB in the BPE layout)
MAX_LINE_BYTES = 8 << 20
# --truncation's choices (HF's truncation directions)
TRUNCATION_DIRECTIONS = ("right", "left")
# the column saying which input row a window comes from (with --stride), named as transformers'
# `return_overflowing_tokens=True` names it
OVERFLOW_COLUMN = "overflow_to_sample_mapping"
