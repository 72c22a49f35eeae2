-- Stage 5: initial symbols — every word as a list of token ids.
--
-- In:  tc_words(w, word, count, first_seen), tc_vocab from stage 4;
--      $prefix VARCHAR (continuing-subword prefix, NULL = none), $suffix VARCHAR (end-of-word
--      suffix fused to the last character, NULL = none), $eow_token VARCHAR (a separate symbol
--      after each word, NULL = none), $variant_order VARCHAR[] (variants listed there get the
--      first variant ids, in that order).
-- Out: tc_vocab gains the variants (kind 'variant', e.g. '##a', 'a</w>'), sorted by string;
--      tc_seg(w INTEGER, wc BIGINT, syms INTEGER[], st INTEGER[]): each word's symbols (ids) and
--      each symbol's start, the index of its first initial symbol in the word (st orders the
--      occurrences of a pair for the first-seen tie-break).
--
-- Characters outside the vocabulary (a limited alphabet) are dropped, as HF does; the prefix and
-- suffix still follow the character's place in the original word (i > 0, i = n - 1).

-- name: symbols
CREATE OR REPLACE TABLE tc_sym AS
WITH chars AS (
    SELECT w, unnest(string_split(word, '')) AS ch, unnest(range(length(word))) AS i,
           length(word) AS n
    FROM tc_words
)
SELECT w, i,
       CASE WHEN $prefix::VARCHAR IS NOT NULL AND i > 0 THEN $prefix::VARCHAR || ch ELSE ch END
       || CASE WHEN $suffix::VARCHAR IS NOT NULL AND i = n - 1 THEN $suffix::VARCHAR ELSE '' END
           AS tok
FROM chars
WHERE ch IN (SELECT token FROM tc_vocab)
UNION ALL
SELECT w, length(word) AS i, $eow_token::VARCHAR AS tok
FROM tc_words
WHERE $eow_token::VARCHAR IS NOT NULL;

-- name: variants
INSERT INTO tc_vocab
SELECT ((SELECT count(*) FROM tc_vocab)
        + row_number() OVER (ORDER BY coalesce(r.o, 2147483647), v.tok) - 1)::INTEGER,
       v.tok, 'variant', 1
FROM (SELECT DISTINCT tok FROM tc_sym WHERE tok NOT IN (SELECT token FROM tc_vocab)) v
LEFT JOIN (
    SELECT tok, max(o) AS o
    FROM (SELECT unnest($variant_order::VARCHAR[]) AS tok,
                 unnest(range(len($variant_order::VARCHAR[]))) AS o)
    GROUP BY tok
) r USING (tok);

-- name: seg
CREATE OR REPLACE TABLE tc_seg AS
SELECT w.w, w.count::BIGINT AS wc,
       coalesce(s.syms, []::INTEGER[]) AS syms,
       coalesce(range(len(s.syms))::INTEGER[], []::INTEGER[]) AS st
FROM tc_words w
LEFT JOIN (
    SELECT s.w, list(v.id ORDER BY s.i) AS syms
    FROM tc_sym s JOIN tc_vocab v ON v.token = s.tok
    GROUP BY s.w
) s USING (w)
ORDER BY w.w;
DROP TABLE tc_sym;
