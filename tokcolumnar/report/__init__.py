"""`tokcolumnar report` and `compare`: the metrics people publish about a tokenizer (columnar,
`metrics`), the vocabulary's own tables (`vocabulary`), and charts in one offline HTML page
(`charts`, `page`: the optional extra `tokcolumnar[report]`, Altair + vl-convert)."""
