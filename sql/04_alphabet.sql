-- Stage 4: alphabet and token ids.
--
-- In:  tc_words(w, word, count, first_seen);
--      $special_tokens VARCHAR[] (in id order), $initial_alphabet VARCHAR[] (always kept),
--      $limit_alphabet BIGINT (NULL = keep every character), $eow_token VARCHAR (NULL = none).
-- Out: tc_chars(ch, n)          every character with its count weighted by word counts;
--      tc_alphabet(ch)          the characters kept;
--      tc_vocab(id INTEGER, token VARCHAR, kind VARCHAR, blen INTEGER) with, in id order:
--        the special tokens as given, the kept characters by code point, then the end-of-word
--        token (kind 'alphabet', length 0) unless it already exists.
--      Stage 5 appends the prefixed/suffixed variants; the merge passes append merged tokens.
--      blen is the token's length in characters without prefix/suffix (max_token_length).
--
-- limit_alphabet keeps the most frequent characters, initial-alphabet characters first, ties by
-- code point (VARCHAR order is UTF-8 byte order, i.e. code point order).

-- name: chars
CREATE OR REPLACE TABLE tc_chars AS
SELECT ch, sum(count)::HUGEINT AS n
FROM (SELECT unnest(string_split(word, '')) AS ch, count FROM tc_words)
GROUP BY ch;

-- name: alphabet
CREATE OR REPLACE TABLE tc_alphabet AS
WITH initial AS (SELECT DISTINCT unnest($initial_alphabet::VARCHAR[]) AS ch),
candidates AS (
    SELECT ch, 1 AS tier, n FROM tc_chars WHERE ch NOT IN (SELECT ch FROM initial)
    UNION ALL
    SELECT ch, 0 AS tier, NULL::HUGEINT AS n FROM initial
),
ranked AS (SELECT ch, row_number() OVER (ORDER BY tier, n DESC, ch) AS rk FROM candidates)
SELECT ch FROM ranked
WHERE $limit_alphabet::BIGINT IS NULL OR rk <= $limit_alphabet::BIGINT;

-- name: vocab
CREATE OR REPLACE TABLE tc_vocab (id INTEGER, token VARCHAR, kind VARCHAR, blen INTEGER);
INSERT INTO tc_vocab
SELECT (o - 1)::INTEGER, t, 'special', length(t)
FROM (SELECT unnest($special_tokens::VARCHAR[]) AS t,
             unnest(range(1, len($special_tokens::VARCHAR[]) + 1)) AS o);
INSERT INTO tc_vocab
SELECT ((SELECT count(*) FROM tc_vocab) + row_number() OVER (ORDER BY ch) - 1)::INTEGER,
       ch, 'alphabet', 1
FROM tc_alphabet
WHERE ch NOT IN (SELECT token FROM tc_vocab);
INSERT INTO tc_vocab
SELECT (SELECT count(*) FROM tc_vocab)::INTEGER, $eow_token::VARCHAR, 'alphabet', 0
WHERE $eow_token::VARCHAR IS NOT NULL
  AND $eow_token::VARCHAR NOT IN (SELECT token FROM tc_vocab);
