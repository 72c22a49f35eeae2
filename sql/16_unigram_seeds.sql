-- Stage 16: the seed pieces of the Unigram trainer (`MakeSeedSentencePiecesFromCorpus`,
-- src/unigram_model_trainer.cc; docs/unigram.md, 2), as the SQL twin of the Polars trainer's
-- `seed_pieces` / `substring_seeds` (tokcolumnar/training/unigram.py): the characters with
-- their counts, then the frequent substrings SentencePiece's LCP intervals give, scored by
-- ToLogProb. `tokcolumnar crosscheck --model unigram` runs it on the sentences the trainer
-- seeded from and compares the pieces, their order and their scores with the trainer's seeds
-- (docs/unigram.md, "The SQL twin").
--
-- As the trainer, without a suffix array: a valid piece holds `▁` only first, so every
-- candidate lies inside one word, and the LCP intervals can be read off the words. A substring
-- `s` of 2+ characters is an interval of SentencePiece's byte text (every sentence's UTF-8
-- bytes and a NUL, `count` times) exactly when the first bytes after its occurrences take two
-- values (the next character's lead byte, 0xE2 for the next word's `▁`, 0 at a sentence end),
-- its frequency then the number of its occurrences; and `s` + NUL is one when `s` ends 2+
-- sentences whose next bytes (after the NUL: the sentence's own first byte for its count - 1
-- repeats, then the next sentence's, 256 for the end of the text) differ, its frequency the
-- number of those sentence ends. Both frequencies add up (a quirk of SentencePiece 0.2.3).
-- Every span of every distinct (word, sentence-final?) kind is enumerated here, with no
-- pruning: this is a cross-check, run on small corpora.
--
-- A span is a valid piece (`IsValidSentencePiece`) when it holds no `▅`, U+0000, U+001F,
-- U+0020 or surrogate, `▁` only first, with `split_digits` no ASCII or full-width digit, and
-- with `split_by_unicode_script` no two consecutive scripted characters of different
-- scripts: the script is SentencePiece's Unicode 9.0 table, given as ranges by the caller
-- (`tc_sd_scripts`, loaded from Python's copy of that table,
-- tokcolumnar/text/unicode_scripts.py: 687 ranges); a code point in none is `Common`,
-- Hiragana, Katakana and U+30FC count as `Han`, an `Inherited` character (a combining mark)
-- takes the script before it (it is skipped), `▁` has none, and with `split_by_number` off a
-- digit matches any script (and resets it: the character after a digit matches any script
-- too). (A word holds `▁` only first, so that rule never cuts a span here: it is kept as
-- SentencePiece's.) Validity only gets lost as a span grows, so each start position has a
-- longest valid span (its end: `stop`).
--
-- In:  tc_sd_sentences(i BIGINT, sentence VARCHAR, cnt BIGINT): the sentences the trainer
--      seeds from (normalized, `▁` for spaces, meta pieces as U+001F, characters outside the
--      required ones as `▅`), in SentencePiece's order, with their counts;
--      tc_sd_scripts(lo INTEGER, hi INTEGER, script VARCHAR): the code point ranges of every
--      script but `Common`;
--      $split_by_unicode_script, $split_by_number, $split_digits (`chars`), $max_len
--      (`substrings`: max_sentencepiece_length), $seed_size (`seeds`:
--      seed_sentencepiece_size): the trainer's options.
-- Out: tc_sd_kinds(k, word, final, cnt) and tc_sd_ends(word, n, lo, hi) (`kinds`): the
--      distinct (word, sentence-final?) kinds with their counts, and for each word that ends
--      a sentence the number of sentence ends after it and the smallest and largest byte
--      after their NUL;
--      tc_sd_chars(k, pos, c, cp, lead, stop) (`chars`): every character of every kind, its
--      UTF-8 lead byte, and the end (exclusive) of the longest valid span starting there;
--      tc_sd_candidates(piece, len, freq, value) (`substrings`): every candidate substring,
--      with its frequency and its score freq × length in float32;
--      tc_sd_seeds(rank, piece, value, score) (`seeds`): the seeds in SentencePiece's order,
--      the characters (by count desc, code point asc) then the first $seed_size candidates
--      (by value desc, UTF-8 length desc, bytes asc), scored by ToLogProb.

-- name: kinds
-- the first UTF-8 byte of a code point
CREATE OR REPLACE MACRO tc_lead_byte(cp) AS
    CASE WHEN cp < 128 THEN cp                    -- ASCII: the byte itself
         WHEN cp < 2048 THEN 192 | (cp >> 6)      -- 0xC0 | ...
         WHEN cp < 65536 THEN 224 | (cp >> 12)    -- 0xE0 | ...
         ELSE 240 | (cp >> 18) END;               -- 0xF0 | ...

-- every word of every sentence (`SplitIntoWords`: a word starts at the text's start and at
-- each `▁`), whether it ends its sentence, and for a sentence's last word the bytes after
-- the sentence's NUL: its own first byte, and the next sentence's (256 after the last one)
CREATE OR REPLACE TEMP TABLE tc_sd_tokens AS
WITH sentences AS (
    SELECT i, cnt, regexp_extract_all(sentence, '▁[^▁]*|[^▁]+') AS words,
           tc_lead_byte(unicode(sentence)) AS own_next,
           coalesce(lead(tc_lead_byte(unicode(sentence))) OVER (ORDER BY i), 256) AS next
    FROM tc_sd_sentences
),
tokens AS (
    SELECT i, cnt, words, own_next, next, unnest(range(1, len(words) + 1)) AS j
    FROM sentences
)
SELECT i, cnt, words[j] AS word, j = len(words) AS final, own_next, next FROM tokens;

CREATE OR REPLACE TEMP TABLE tc_sd_kinds AS
SELECT row_number() OVER (ORDER BY word, final) - 1 AS k, word, final, cnt
FROM (SELECT word, final, sum(cnt)::BIGINT AS cnt FROM tc_sd_tokens GROUP BY word, final);

-- a sentence counted `cnt` times is followed by itself `cnt - 1` times, then by the next one
CREATE OR REPLACE TEMP TABLE tc_sd_ends AS
SELECT word, sum(n)::BIGINT AS n, min(after) AS lo, max(after) AS hi
FROM (SELECT word, own_next AS after, cnt - 1 AS n FROM tc_sd_tokens WHERE final
      UNION ALL
      SELECT word, next, 1 FROM tc_sd_tokens WHERE final)
WHERE n > 0
GROUP BY word;

-- name: chars
CREATE OR REPLACE TEMP TABLE tc_sd_chars AS
WITH chars AS (
    SELECT k, length(word)::INTEGER AS n, unnest(range(length(word)))::INTEGER AS pos,
           unnest(string_split(word, '')) AS c
    FROM tc_sd_kinds
),
-- each distinct character's class; its script NULL where it matches any script (a digit
-- with split_by_number off)
classes AS (
    SELECT d.c, d.cp,
           d.cp IN (9605, 0, 31, 32)                   -- ▅, NUL, U+001F, space
               OR d.cp BETWEEN 55296 AND 57343         -- surrogates (0xD800-0xDFFF)
               OR d.cp > 1114111 AS bad,               -- past 0x10FFFF
           d.cp = 9601 AS ws,                          -- ▁
           d.cp BETWEEN 48 AND 57 OR d.cp BETWEEN 65296 AND 65305 AS digit,  -- 0-9, ０-９
           CASE WHEN NOT $split_by_number
                     AND (d.cp BETWEEN 48 AND 57 OR d.cp BETWEEN 65296 AND 65305) THEN NULL
                WHEN r.script IN ('Hiragana', 'Katakana') OR d.cp = 12540 THEN 'Han'  -- ー
                ELSE coalesce(r.script, 'Common') END AS script
    FROM (SELECT DISTINCT c, unicode(c) AS cp FROM chars) d
    LEFT JOIN tc_sd_scripts r ON d.cp BETWEEN r.lo AND r.hi
),
classed AS (
    SELECT ch.k, ch.n, ch.pos, ch.c, cl.cp, cl.bad, cl.ws, cl.digit, cl.script,
           NOT cl.ws AND cl.script IS DISTINCT FROM 'Inherited' AS scripted
    FROM chars ch JOIN classes cl USING (c)
),
-- a script change: a scripted character whose script differs from the previous scripted
-- character's (neither matching any script); a span holding both is invalid
changes AS (
    SELECT k, prev_pos AS pos, pos AS change
    FROM (SELECT k, pos, script,
                 lag(pos) OVER (PARTITION BY k ORDER BY pos) AS prev_pos,
                 lag(script) OVER (PARTITION BY k ORDER BY pos) AS prev_script
          FROM classed WHERE scripted)
    WHERE $split_by_unicode_script AND script <> prev_script
)
-- the end of the longest valid span starting at `pos` (exclusive): at the latest the word's
-- end, and before the first forbidden character from `pos` on, the first `▁` after `pos`,
-- with split_digits the first digit from `pos` on (a digit stands alone), and the second
-- character of the first script change after `pos`
SELECT ch.k, ch.pos, ch.c, ch.cp, tc_lead_byte(ch.cp) AS lead,
       least(ch.n,
             min(CASE WHEN ch.bad THEN ch.pos END) OVER later,
             min(CASE WHEN ch.ws THEN ch.pos END) OVER after,
             min(CASE WHEN $split_digits AND ch.digit THEN ch.pos END) OVER later,
             min(g.change) OVER later) AS stop
FROM classed ch LEFT JOIN changes g ON g.k = ch.k AND g.pos = ch.pos
WINDOW later AS (PARTITION BY ch.k ORDER BY ch.pos
                 ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
       after AS (PARTITION BY ch.k ORDER BY ch.pos
                 ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING);

-- name: substrings
-- every valid span of 2 to $max_len characters, with the first byte after it: the next
-- character's lead byte, at a word's end 0xE2 (the next word's `▁`) or, ending a sentence,
-- NUL; then per string its occurrences (× the kinds' counts), whether the bytes after them
-- take two values, and for those at sentence ends the sentence ends after them
CREATE OR REPLACE TEMP TABLE tc_sd_candidates AS
WITH spans AS (
    SELECT st.k, kd.word, kd.cnt, l.len,
           substring(kd.word, st.pos + 1, l.len) AS piece,
           CASE WHEN nx.pos IS NOT NULL THEN nx.lead
                WHEN kd.final THEN 0
                ELSE 226 END AS follow,                -- 0xE2
           nx.pos IS NULL AND kd.final AS ends_sentence
    FROM tc_sd_chars st
    JOIN tc_sd_kinds kd ON kd.k = st.k
    JOIN (SELECT unnest(range(2, $max_len + 1))::INTEGER AS len) l ON st.pos + l.len <= st.stop
    LEFT JOIN tc_sd_chars nx ON nx.k = st.k AND nx.pos = st.pos + l.len
),
counted AS (
    SELECT sp.piece, any_value(sp.len) AS len,
           CASE WHEN min(sp.follow) <> max(sp.follow) THEN sum(sp.cnt) ELSE 0 END
           + CASE WHEN min(e.lo) < max(e.hi) THEN sum(e.n) ELSE 0 END AS freq
    FROM spans sp LEFT JOIN tc_sd_ends e ON sp.ends_sentence AND e.word = sp.word
    GROUP BY sp.piece
)
SELECT piece, len, freq::BIGINT AS freq, freq::FLOAT * len::FLOAT AS value
FROM counted
WHERE freq >= 2;

-- name: seeds
-- the characters (all but `▅` and U+001F) with their counts, then the candidates cut to
-- $seed_size, each valued as a float32; ToLogProb: log(value) - log(the values' sum), in
-- double, rounded to float32. The values are float32 integers (counts, and freq × length
-- rounded), so their double sum is exact in any order: it equals SentencePiece's sum in order.
CREATE OR REPLACE TEMP TABLE tc_sd_seeds AS
WITH chars AS (
    SELECT ch.c AS piece, ch.cp, sum(kd.cnt) AS n
    FROM tc_sd_chars ch JOIN tc_sd_kinds kd USING (k)
    WHERE ch.cp NOT IN (9605, 31)                      -- ▅, U+001F
    GROUP BY ch.c, ch.cp
),
ranked AS (
    SELECT row_number() OVER (ORDER BY n DESC, cp) - 1 AS rank, piece, n::FLOAT AS value
    FROM chars
    UNION ALL
    SELECT (SELECT count(*) FROM chars) + row_number() OVER (
               ORDER BY value DESC, strlen(piece) DESC, piece) - 1, piece, value
    FROM (SELECT piece, value FROM tc_sd_candidates
          ORDER BY value DESC, strlen(piece) DESC, piece
          LIMIT $seed_size)
)
SELECT rank, piece, value,
       (ln(value::DOUBLE) - ln(sum(value::DOUBLE) OVER ()))::FLOAT AS score
FROM ranked
ORDER BY rank;
