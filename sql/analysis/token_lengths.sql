-- Token length histogram: how many vocabulary tokens have each length (in characters, the
-- token string as stored, prefixes/suffixes included), split by kind.
-- In: the `vocab` view. Out: chars, tokens, and the count per kind.
-- Usage: tokcolumnar sql DIR --query token_lengths
SELECT length(token) AS chars,
       count(*) AS tokens,
       count(*) FILTER (WHERE kind = 'merge') AS merged,
       count(*) FILTER (WHERE kind <> 'merge') AS initial
FROM vocab
GROUP BY chars
ORDER BY chars;
