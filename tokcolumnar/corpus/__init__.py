"""Stages 1-2: the corpus read as sequences (`sources`, `readers`) and counted into the `words`
table (`counting`), in ordered units when the count is bounded or distributed (`units`,
`spill`); or a words table given instead (`counts_file`)."""
