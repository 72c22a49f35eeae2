"""Alternative engines (the DuckDB SQL twin) and the cross-check between engines."""
