-- Words whose final segmentation is a single token, most frequent first.
-- Parameter: `n` (default 50). In: the `words` and `vocab` views.
-- Out: word, count, the token and its id, and the rank of the merge that made it (NULL when
-- the token is a character).
-- Usage: tokcolumnar sql DIR --query single_token_words
SELECT w.word, w.count, w.tokens[1] AS token, w.ids[1] AS id, v.rank
FROM words w
JOIN vocab v ON v.id = w.ids[1]
WHERE len(w.ids) = 1
ORDER BY w.count DESC, w.word
LIMIT coalesce(getvariable('n'), 50);
