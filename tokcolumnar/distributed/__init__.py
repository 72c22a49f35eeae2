"""Counting and encoding on distributed engines: ordered units (`corpus.units`, no engine import)
and Ray Data (`ray`, imports Ray when used)."""
