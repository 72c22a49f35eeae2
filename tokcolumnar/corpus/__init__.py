"""Stages 1-2: the corpus read as sequences (`sources`, `readers`) and counted into the `words`
table (`counting`); or a words table given instead (`counts_file`)."""
