-- How much of the corpus is covered by words that became a single token.
-- In: the `words` view. Out: distinct words, occurrences, and the share (in %) of each that is
-- one token, plus the mean number of tokens per word occurrence.
-- Usage: tokcolumnar sql DIR --query single_token_share
SELECT count(*) AS words,
       sum(count)::UBIGINT AS occurrences,
       round(100.0 * count(*) FILTER (WHERE len(ids) = 1) / count(*), 2) AS single_token_words_pct,
       round(100.0 * sum(count) FILTER (WHERE len(ids) = 1) / sum(count), 2)
           AS single_token_occurrences_pct,
       round(sum(count * len(ids)) / sum(count), 3) AS tokens_per_occurrence
FROM words;
