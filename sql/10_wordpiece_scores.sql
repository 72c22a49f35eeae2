-- Stage 10: WordPiece likelihood scoring (docs/architecture.md, "WordPiece") — the counts, and the candidate pairs
-- in score order.
--
-- In:  tc_seg(w, wc, syms, st) and tc_vocab(id, token, kind, blen) from stages 4-5 (nothing of
--      stage 6 or later: WordPiece keeps its own tables).
-- Out: `init` creates the WordPiece working tables:
--        tc_wp_seg(w, wc, s)       each word's current symbols as a string ',id1,,id2,,...,'
--                                  ('' for no symbol): every id between its own two commas, so
--                                  that replace(s, ',a,,b,', ',n,') merges the occurrences of
--                                  (a, b) left to right (`a a a` -> `n a`), as the Polars engine;
--        tc_wp_tok(id, cnt, blen)  token counts over the current segmentation, weighted by word
--                                  counts (every vocab id, 0 when absent), blen its length
--                                  without prefix (max_token_length);
--        tc_wp_pairs(l, r, cnt)    pair counts, weighted by word counts (rows may reach 0);
--        tc_wp_occ(l, r, w)        which words hold which pair (distinct);
--        tc_wp_cand, tc_wp_chain, tc_wp_log: empty, for the merge passes (stage 11).
--      `candidates` ($n, $minimum, $max_token_length): tc_wp_cand(i, l, r, cnt, score, lc, rc,
--        blen), the best $n eligible pairs, i = 0 the best, with their exact score
--        `cnt / (c_l::DOUBLE * c_r::DOUBLE)` and the two token counts. Order: score DESC,
--        count DESC, (left_id, right_id) ASC. Eligible: count > 0, count >= min_frequency,
--        blen(l) + blen(r) <= max_token_length (NULL = no limit).
--      The macros tc_wp_ids(s) (the ids of a segmentation string) and tc_wp_pairs_of(ids)
--      (its adjacent pairs as {l, r} structs).

-- name: init
CREATE OR REPLACE MACRO tc_wp_ids(s) AS
    CASE WHEN s = '' THEN []::INTEGER[] ELSE string_split(s[2:-2], ',,')::INTEGER[] END;
CREATE OR REPLACE MACRO tc_wp_pairs_of(x) AS
    list_transform(range(1, len(x)), lambda i: {'l': x[i], 'r': x[i + 1]});
CREATE OR REPLACE TABLE tc_wp_seg AS
SELECT w, wc,
       CASE WHEN len(syms) = 0 THEN '' ELSE ',' || array_to_string(syms, ',,') || ',' END AS s
FROM tc_seg;
CREATE OR REPLACE TABLE tc_wp_tok AS
SELECT v.id, coalesce(c.cnt, 0)::BIGINT AS cnt, v.blen
FROM tc_vocab v
LEFT JOIN (SELECT id, sum(wc) AS cnt
           FROM (SELECT unnest(syms) AS id, wc FROM tc_seg) GROUP BY id) c USING (id);
CREATE OR REPLACE TABLE tc_wp_occ AS
SELECT p.l, p.r, w, sum(wc)::BIGINT AS cnt
FROM (SELECT w, wc, unnest(tc_wp_pairs_of(syms)) AS p FROM tc_seg)
GROUP BY ALL;
CREATE OR REPLACE TABLE tc_wp_pairs AS
SELECT l, r, sum(cnt)::BIGINT AS cnt FROM tc_wp_occ GROUP BY l, r;
ALTER TABLE tc_wp_occ DROP COLUMN cnt;
-- the best candidates before a pass
CREATE OR REPLACE TABLE tc_wp_cand (i INTEGER, l INTEGER, r INTEGER, cnt BIGINT, score DOUBLE,
                                    lc BIGINT, rc BIGINT, blen INTEGER, ltok VARCHAR,
                                    rtok VARCHAR, fw INTEGER);
-- the state after a pass's chain of merges (stage 11)
CREATE OR REPLACE TABLE tc_wp_chain (i INTEGER, kind VARCHAR, w INTEGER, wc BIGINT, s VARCHAR,
                                     l INTEGER, r INTEGER, n INTEGER, d BIGINT, cnt BIGINT,
                                     score DOUBLE, lc BIGINT, rc BIGINT, blen INTEGER,
                                     tok VARCHAR, fresh BOOLEAN, rk INTEGER, words BIGINT);
CREATE OR REPLACE TABLE tc_wp_log (rank INTEGER, left_id INTEGER, right_id INTEGER, id INTEGER,
                                   count BIGINT, score DOUBLE, words BIGINT, left_count BIGINT,
                                   right_count BIGINT);

-- name: candidates
-- $order: 'likelihood' (WordPiece: score, count, then (left id, right id)); the BPE orders that
-- keep one entry per pair and merge every occurrence (docs/architecture.md, "The chain for
-- lexical-max and first-seen"): 'lexical-max' (count, then the greater (left, right) strings),
-- 'first-seen' (count, then the pair whose first occurrence comes first: the first word
-- holding it, fw, then its first position there, compared within that word's current
-- segmentation string by the chain). The BPE orders score 0.
DELETE FROM tc_wp_cand;
INSERT INTO tc_wp_cand
WITH eligible AS (
    SELECT p.l, p.r, p.cnt,
           CASE WHEN $order::VARCHAR = 'likelihood'
                THEN p.cnt / (tl.cnt::DOUBLE * tr.cnt::DOUBLE) ELSE 0.0 END AS score,
           tl.cnt AS lc, tr.cnt AS rc, tl.blen + tr.blen AS blen
    FROM tc_wp_pairs p
    JOIN tc_wp_tok tl ON tl.id = p.l
    JOIN tc_wp_tok tr ON tr.id = p.r
    WHERE p.cnt > 0 AND p.cnt >= $minimum::BIGINT
      AND ($max_token_length::BIGINT IS NULL
           OR tl.blen + tr.blen <= $max_token_length::BIGINT)
),
-- the BPE orders: only pairs at a count the first $n reach can be among them
floor AS (
    SELECT cnt FROM eligible WHERE $order::VARCHAR <> 'likelihood'
    ORDER BY cnt DESC LIMIT 1 OFFSET $n::INTEGER - 1
),
keyed AS (
    SELECT e.*,
           coalesce(vl.token, '') AS ltok, coalesce(vr.token, '') AS rtok, f.fw
    FROM eligible e
    LEFT JOIN tc_vocab vl ON vl.id = e.l AND $order::VARCHAR = 'lexical-max'
    LEFT JOIN tc_vocab vr ON vr.id = e.r AND $order::VARCHAR = 'lexical-max'
    LEFT JOIN (SELECT l, r, min(w) AS fw FROM tc_wp_occ WHERE $order::VARCHAR = 'first-seen'
               GROUP BY l, r) f ON f.l = e.l AND f.r = e.r
    WHERE $order::VARCHAR = 'likelihood' OR e.cnt >= coalesce((SELECT cnt FROM floor), 0)
),
placed AS (  -- first-seen: the first position in the first word (in its segmentation string)
    SELECT k.*, CASE WHEN $order::VARCHAR = 'first-seen'
                     THEN strpos(s.s, ',' || k.l || ',,' || k.r || ',') END AS pos
    FROM keyed k LEFT JOIN tc_wp_seg s ON s.w = k.fw
)
SELECT (row_number() OVER (ORDER BY score DESC, cnt DESC, ltok DESC, rtok DESC, fw, pos, l, r)
        - 1)::INTEGER AS i,
       l, r, cnt, score, lc, rc, blen, ltok, rtok, fw
FROM placed
ORDER BY score DESC, cnt DESC, ltok DESC, rtok DESC, fw, pos, l, r
LIMIT $n::INTEGER;
