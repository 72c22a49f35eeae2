"""Encoding datasets: inputs -> Parquet columns of token ids (`dataset`)."""
