-- Stage 10: WordPiece likelihood scoring (DESIGN.md §3) — the counts, the candidate pairs in
-- score order, and the scores a batch of merges would leave.
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
--        tc_wp_m, tc_wp_work, tc_wp_delta, tc_wp_log: empty, for the merge passes (stage 11).
--      `candidates` ($n, $minimum, $max_token_length, $prefix): the best $n eligible pairs,
--        best first, with their exact score `cnt / (c_l::DOUBLE * c_r::DOUBLE)`, the two token
--        counts, the merged token (right without its prefix) and its id when it already exists.
--        Order: score DESC, count DESC, (left_id, right_id) ASC. Eligible: count > 0, count >=
--        min_frequency, blen(l) + blen(r) <= max_token_length (NULL = no limit).
--      `summary` ($minimum, $max_token_length): for each pass member k (tc_wp_m, filled by
--        stage 11's `members`/`work`) the weight it merges, the words it touches, whether a
--        pair joins its tokens to an earlier member's (`conn`), and the best eligible pair
--        among those whose score member k's merge changes, scored as they stand right after
--        it (pairs containing a, b, or an existing token the merge adds to, and the new pairs).
--        The engine cuts the batch where such a pair, or a connection, would change the order.

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
-- the members of a pass (k = 0, 1, ... in merge order), given by the engine
CREATE OR REPLACE TABLE tc_wp_m (k INTEGER, rank INTEGER, a INTEGER, b INTEGER, n INTEGER,
                                 fresh BOOLEAN, tok VARCHAR, blen INTEGER, cnt BIGINT,
                                 score DOUBLE, lc BIGINT, rc BIGINT, pat VARCHAR, rep VARCHAR);
-- the words each member merges in (nm occurrences), old and new symbols
CREATE OR REPLACE TABLE tc_wp_work (k INTEGER, w INTEGER, wc BIGINT, old VARCHAR, new VARCHAR,
                                    nm BIGINT);
-- each member's pair-count changes (applied alone to the counts before the pass)
CREATE OR REPLACE TABLE tc_wp_delta (k INTEGER, l INTEGER, r INTEGER, d BIGINT);
CREATE OR REPLACE TABLE tc_wp_log (rank INTEGER, left_id INTEGER, right_id INTEGER, id INTEGER,
                                   count BIGINT, score DOUBLE, words BIGINT, left_count BIGINT,
                                   right_count BIGINT);

-- name: candidates
WITH top AS (
    SELECT p.l, p.r, p.cnt, p.cnt / (tl.cnt::DOUBLE * tr.cnt::DOUBLE) AS score,
           tl.cnt AS lc, tr.cnt AS rc, tl.blen + tr.blen AS blen
    FROM tc_wp_pairs p
    JOIN tc_wp_tok tl ON tl.id = p.l
    JOIN tc_wp_tok tr ON tr.id = p.r
    WHERE p.cnt > 0 AND p.cnt >= $minimum::BIGINT
      AND ($max_token_length::INTEGER IS NULL
           OR tl.blen + tr.blen <= $max_token_length::INTEGER)
    ORDER BY score DESC, p.cnt DESC, p.l, p.r
    LIMIT $n::INTEGER
),
named AS (
    SELECT t.*, vl.token AS ltok, vr.token AS rtok,
           vl.token || CASE WHEN starts_with(vr.token, $prefix::VARCHAR)
                            THEN vr.token[length($prefix::VARCHAR) + 1:]
                            ELSE vr.token END AS tok
    FROM top t
    JOIN tc_vocab vl ON vl.id = t.l
    JOIN tc_vocab vr ON vr.id = t.r
)
SELECT nm.l, nm.r, nm.cnt, nm.score, nm.lc, nm.rc, nm.blen, nm.tok, v.id AS reuse_id
FROM named nm
LEFT JOIN tc_vocab v ON v.token = nm.tok
ORDER BY nm.score DESC, nm.cnt DESC, nm.l, nm.r;

-- name: summary
WITH tm AS (  -- token -> member: the tokens whose count member k changes (disjoint members)
    SELECT DISTINCT id, k
    FROM (SELECT a AS id, k FROM tc_wp_m
          UNION ALL SELECT b, k FROM tc_wp_m
          UNION ALL SELECT n, k FROM tc_wp_m)
),
merged AS (
    SELECT k, sum(wc * nm)::BIGINT AS m, count(*)::BIGINT AS words
    FROM tc_wp_work GROUP BY k
),
tokd AS (  -- token count changes of each member: a -m, b -m, new +m
    SELECT k, id, sum(d)::BIGINT AS d, max(blen) AS blen
    FROM (SELECT m.k, unnest([m.a, m.b, m.n]) AS id, unnest([-g.m, -g.m, g.m]) AS d,
                 unnest([NULL, NULL, m.blen]) AS blen
          FROM tc_wp_m m JOIN merged g USING (k))
    GROUP BY k, id
),
universe AS (  -- every pair that exists before or during the pass
    SELECT l, r FROM tc_wp_pairs WHERE cnt > 0
    UNION
    SELECT l, r FROM tc_wp_delta
),
aff AS (  -- member k changes the pairs holding one of its tokens
    SELECT tm.k, u.l, u.r FROM universe u JOIN tm ON tm.id = u.l
    UNION
    SELECT tm.k, u.l, u.r FROM universe u JOIN tm ON tm.id = u.r
),
post AS (  -- their counts right after member k: before the pass + changes of members <= k
    SELECT a.k, a.l, a.r,
           (coalesce(any_value(p.cnt), 0) + coalesce(sum(d.d), 0))::BIGINT AS cnt
    FROM aff a
    LEFT JOIN tc_wp_pairs p ON p.l = a.l AND p.r = a.r
    LEFT JOIN tc_wp_delta d ON d.l = a.l AND d.r = a.r AND d.k <= a.k
    GROUP BY a.k, a.l, a.r
),
tokpost AS (  -- a token's count right after member k (its member changes it, if <= k)
    SELECT p.k, p.l, p.r, p.cnt,
           coalesce(tl.cnt, 0) + CASE WHEN dl.k <= p.k THEN dl.d ELSE 0 END AS cl,
           coalesce(tr.cnt, 0) + CASE WHEN dr.k <= p.k THEN dr.d ELSE 0 END AS cr,
           coalesce(tl.blen, dl.blen) + coalesce(tr.blen, dr.blen) AS blen
    FROM post p
    LEFT JOIN tc_wp_tok tl ON tl.id = p.l
    LEFT JOIN tc_wp_tok tr ON tr.id = p.r
    LEFT JOIN tokd dl ON dl.id = p.l
    LEFT JOIN tokd dr ON dr.id = p.r
    WHERE p.cnt > 0 AND p.cnt >= $minimum::BIGINT
),
best AS (
    SELECT k, cnt / (cl::DOUBLE * cr::DOUBLE) AS score, cnt, l, r
    FROM tokpost
    WHERE $max_token_length::INTEGER IS NULL OR blen <= $max_token_length::INTEGER
    QUALIFY row_number() OVER (PARTITION BY k ORDER BY score DESC, cnt DESC, l, r) = 1
),
adjacent AS (  -- occurrences of two members side by side in a word (the later one is cut)
    SELECT DISTINCT greatest(x1.k, x2.k) AS k
    FROM tc_wp_work x1
    JOIN tc_wp_work x2 ON x2.w = x1.w AND x2.k <> x1.k
    JOIN tc_wp_m m1 ON m1.k = x1.k
    JOIN tc_wp_m m2 ON m2.k = x2.k
    WHERE contains(x1.old, ',' || m1.b || ',,' || m2.a || ',')
)
SELECT m.k, coalesce(g.m, 0) AS m, coalesce(g.words, 0) AS words,
       m.k IN (SELECT k FROM adjacent) AS conn, b.score, b.cnt, b.l, b.r
FROM tc_wp_m m
LEFT JOIN merged g USING (k)
LEFT JOIN best b USING (k)
ORDER BY m.k;
