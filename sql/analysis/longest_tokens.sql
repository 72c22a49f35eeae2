-- The longest tokens of the vocabulary (in characters), with when they were made.
-- Parameter: `n` (default 25). In: the `vocab` and `merges` views.
-- Out: token, chars, id, kind, rank of the merge that made it, and that pair's count.
-- Usage: tokcolumnar sql DIR --query longest_tokens
SELECT v.token, length(v.token) AS chars, v.id, v.kind, v.rank, m.count
FROM vocab v
LEFT JOIN merges m ON m.rank = v.rank
ORDER BY chars DESC, v.id
LIMIT coalesce(getvariable('n'), 25);
