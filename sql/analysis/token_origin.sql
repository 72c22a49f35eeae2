-- When a given token entered the vocabulary, and from which pair.
-- Parameter: the token, as the DuckDB variable `token` (default 'the').
-- In: the `vocab` and `merges` views. Out: the token's id and kind, and each merge that produced
-- it (a token made again from another pair keeps its id: HF's behaviour) with its rank, pair,
-- pair count and words touched; no merge rows for special / alphabet / variant tokens.
-- Usage: tokcolumnar sql DIR --query token_origin --param token=ing
SELECT v.token, v.id, v.kind, m.rank, m."left", m."right", m.count, m.words
FROM vocab v
LEFT JOIN merges m ON m.id = v.id
WHERE v.token = coalesce(getvariable('token'), 'the')
ORDER BY m.rank;
