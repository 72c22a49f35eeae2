-- Stage 3: word counting — sequences -> the `words` table.
--
-- In:  tc_corpus(src, seq, text) from stage 2; the macros of stage 1;
--      $normalizer ('none' | 'nfc'), $lowercase (BOOLEAN), $pretokenizer ('whitespace' |
--      'whitespace-split' | 'none').
-- Out: tc_words(w INTEGER, word VARCHAR, count UBIGINT, first_seen UBIGINT), one row per
--      distinct non-empty word, sorted by first_seen; w = 0, 1, ... in that order.
--
-- first_seen is the index of the word's first occurrence in the stream of all words of the
-- corpus (inputs in order, sequences in order, words left to right), exactly as the Polars
-- engine numbers them.

-- name: tokenize
CREATE OR REPLACE TABLE tc_tok AS
SELECT src, seq,
       tc_pretokenize(tc_normalize(text, $normalizer, $lowercase), $pretokenizer) AS pieces
FROM tc_corpus
WHERE text IS NOT NULL;

-- name: count
CREATE OR REPLACE TABLE tc_words AS
WITH offsets AS (
    SELECT pieces,
           coalesce(sum(len(pieces)) OVER (ORDER BY src, seq
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS off
    FROM tc_tok
),
occurrences AS (
    SELECT unnest(pieces) AS word, off + unnest(range(len(pieces))) AS pos FROM offsets
),
counted AS (
    SELECT word, count(*) AS count, min(pos) AS first_seen
    FROM occurrences
    WHERE word <> ''
    GROUP BY word
)
SELECT (row_number() OVER (ORDER BY first_seen) - 1)::INTEGER AS w, word,
       count::UBIGINT AS count, first_seen::UBIGINT AS first_seen
FROM counted
ORDER BY first_seen;

-- name: stats
SELECT count(*) AS words, coalesce(max(length(word)), 0) AS longest FROM tc_words;

-- name: from_counts
-- The `--from-counts` table (registered as tc_counts_input: word, count[, first_seen]) read the
-- way the Polars engine reads it: empty / null words and zero counts dropped, duplicates summed,
-- first_seen = row order when absent.
CREATE OR REPLACE TABLE tc_words AS
SELECT (row_number() OVER (ORDER BY first_seen) - 1)::INTEGER AS w, word,
       count::UBIGINT AS count, first_seen::UBIGINT AS first_seen
FROM (
    SELECT word, sum(count) AS count, min(first_seen) AS first_seen
    FROM tc_counts_input
    WHERE word IS NOT NULL AND word <> '' AND count > 0
    GROUP BY word
)
ORDER BY first_seen;

-- name: from_frame
-- A words table given as a data frame is used as is, row order included (as the Polars engine).
CREATE OR REPLACE TABLE tc_words AS
SELECT (row_number() OVER (ORDER BY tc_row) - 1)::INTEGER AS w, word,
       count::UBIGINT AS count, first_seen::UBIGINT AS first_seen
FROM tc_counts_input
ORDER BY tc_row;

-- name: counts_file
-- A `--from-counts` Parquet file with a first_seen column ...
CREATE OR REPLACE TEMP TABLE tc_counts_input AS
SELECT word, count, first_seen FROM read_parquet($path);

-- name: counts_file_rows
-- ... or without one: rows are in first-seen order.
CREATE OR REPLACE TEMP TABLE tc_counts_input AS
SELECT word, count, file_row_number AS first_seen FROM read_parquet($path, file_row_number = true);
