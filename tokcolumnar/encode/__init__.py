"""Encoding datasets: inputs -> Parquet columns of token ids (`dataset`)."""

# The encode command's settings, here so that the CLI's parser reads them without loading
# Polars (dataset.py does).
OUTPUT_COLUMNS = ("ids", "n_tokens", "tokens", "word_ids", "type_ids", "attention_mask")
DEFAULT_COLUMNS = ("ids", "n_tokens")
PACK_COLUMNS = ("ids", "n_tokens")  # what a packed block has (--pack)
# a longer sequence is refused: memory stays bounded on one huge line (a single 8 MiB
# pre-token costs ~0.7 GB in the BPE layout)
MAX_LINE_BYTES = 8 << 20
