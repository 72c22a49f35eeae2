"""The DuckDB twin of the training pipeline (`engine`), the cross-check of the two engines
(`crosscheck`), and `tokcolumnar sql` (`query`). This package's own modules import DuckDB; this
file does not, so the names below cost nothing to read."""

#: The result formats of `tokcolumnar sql`.
QUERY_FORMATS = ("table", "csv", "json", "parquet")
