-- Stage 11: WordPiece likelihood merge passes (a chain of exact merges per statement) and the
-- result tables.
--
-- In:  the tables of stage 10 (tc_wp_seg, tc_wp_tok, tc_wp_pairs, tc_wp_occ, and tc_wp_cand,
--      the best candidates before the pass), tc_vocab, tc_words.
-- Out: `chain` ($vocab_n the next new id, $merges_n the next rank, $room_vocab / $room_merges
--      how many new tokens / merges may still be made, $steps and $max_words the pass limits,
--      $n the candidates read, $minimum, $max_token_length, $min_score, $prefix) makes the
--      pass's merges one after the other, each exactly the best pair at its moment, in one
--      recursive query, and writes the state after the last into tc_wp_chain, one row per
--      item (kind):
--        'seg'  a word the pass merged in, its new symbols    'pd'   a pair-count change
--        'td'   a token-count change (every token a merge     'log'  a merge (rank rk; one
--               took part in; blen its length, tok the               row per step, kept from
--               string of a token the pass created)                  every step)
--        'ctl'  cnt merges made, d new ids used
--      `apply` writes it into tc_wp_seg, tc_wp_occ, tc_wp_pairs, tc_wp_tok, tc_vocab (kind
--      'merge') and tc_wp_log (pair, new id, pair count, score, words touched, the two token
--      counts the score was computed from).
--      `words_out`, `merges_out`, `vocab_out`: the result tables, with the Polars engine's
--      schemas (merges: ... count UBIGINT, score DOUBLE, words UBIGINT, left_count UBIGINT,
--      right_count UBIGINT; the BPE orders' runs drop the token counts and score).
--
-- Why each merge of the chain is exact: after the merges so far, a pair's count and its tokens'
-- counts differ from what they were before the pass only if it holds a token one of those
-- merges took part in (a, b or the new token: 'td' rows). Such pairs are rescored from the
-- counts before the pass plus the changes ('pd', 'td'). Every other pair stands as before the
-- pass, where tc_wp_cand lists the best ones in order: the first candidate holding no changed
-- token is the best of them — and when every candidate holds one, the unchanged pairs are all
-- below the last candidate, so a rescored pair above it is still known to be the best. Else
-- (or at a limit) the chain stops and the next pass reads new candidates.

-- name: chain
DELETE FROM tc_wp_chain;
INSERT INTO tc_wp_chain
WITH RECURSIVE st(i, kind, w, wc, s, l, r, n, d, cnt, score, lc, rc, blen, tok, fresh, rk,
                  words) AS (
    SELECT 0, 'ctl', NULL::INTEGER, NULL::BIGINT, NULL::VARCHAR, NULL::INTEGER, NULL::INTEGER,
           NULL::INTEGER, 0::BIGINT, 0::BIGINT, NULL::DOUBLE, NULL::BIGINT, NULL::BIGINT,
           NULL::INTEGER, NULL::VARCHAR, NULL::BOOLEAN, NULL::INTEGER, NULL::BIGINT
    UNION ALL
    (WITH prev AS (SELECT * FROM st),
    seg AS (SELECT w, wc, s FROM prev WHERE kind = 'seg'),
    ctl AS (  -- the state of the chain; no row once a limit is reached
        SELECT i, cnt AS merges, d AS used FROM prev
        WHERE kind = 'ctl' AND cnt < $room_merges::BIGINT AND d < $room_vocab::BIGINT
          AND i < $steps::INTEGER AND (SELECT count(*) FROM seg) <= $max_words::INTEGER
    ),
    td AS (SELECT n AS id, d, blen, tok FROM prev WHERE kind = 'td'),
    pd AS (SELECT l, r, d FROM prev WHERE kind = 'pd'),
    names AS (  -- the vocabulary and the tokens the pass made
        SELECT id, token, blen FROM tc_vocab
        UNION ALL SELECT id, tok, blen FROM td WHERE tok IS NOT NULL
    ),
    unaff0 AS (  -- the best candidate without a changed token: as it was before the pass
        SELECT l, r, cnt, score, lc, rc, blen, ltok, rtok, fw FROM tc_wp_cand
        WHERE l NOT IN (SELECT id FROM td) AND r NOT IN (SELECT id FROM td)
        ORDER BY i LIMIT 1
    ),
    unaff_pos AS (  -- first-seen: its first position, in its first word's current string
                    -- (inner joins from an empty side cost nothing in the other orders)
        SELECT u.l, u.r, strpos(coalesce(sg.s, t.s), ',' || u.l || ',,' || u.r || ',') AS pos
        FROM (SELECT * FROM unaff0 WHERE $order::VARCHAR = 'first-seen') u
        JOIN tc_wp_seg t ON t.w = u.fw
        LEFT JOIN seg sg ON sg.w = u.fw
    ),
    unaff AS (
        SELECT u.*, p.pos, 0 AS src FROM unaff0 u LEFT JOIN unaff_pos p ON true
    ),
    changed AS (  -- the pairs with a changed token (and the new ones), rescored: counts
                  -- before the pass plus the changes (every changed pair holds such a token)
        SELECT x.l, x.r, x.cnt,
               coalesce(tl.cnt, 0) + coalesce(dl.d, 0) AS lc,
               coalesce(tr.cnt, 0) + coalesce(dr.d, 0) AS rc,
               coalesce(tl.blen, dl.blen) + coalesce(tr.blen, dr.blen) AS blen
        FROM (SELECT l, r, sum(cnt)::BIGINT AS cnt
              FROM (SELECT p.l, p.r, p.cnt FROM tc_wp_pairs p
                    WHERE p.cnt > 0
                      AND (p.l IN (SELECT id FROM td) OR p.r IN (SELECT id FROM td))
                    UNION ALL
                    SELECT l, r, d FROM pd)
              GROUP BY l, r) x
        LEFT JOIN tc_wp_tok tl ON tl.id = x.l
        LEFT JOIN tc_wp_tok tr ON tr.id = x.r
        LEFT JOIN td dl ON dl.id = x.l
        LEFT JOIN td dr ON dr.id = x.r
    ),
    scored AS (
        SELECT l, r, cnt,
               CASE WHEN $order::VARCHAR = 'likelihood'
                    THEN cnt / (lc::DOUBLE * rc::DOUBLE) ELSE 0.0 END AS score, lc, rc, blen
        FROM changed
        WHERE cnt > 0 AND cnt >= $minimum::BIGINT
          AND ($max_token_length::BIGINT IS NULL OR blen <= $max_token_length::BIGINT)
    ),
    at_top AS (  -- the BPE orders: only a pair at the best count can come first
        SELECT * FROM scored
        WHERE $order::VARCHAR = 'likelihood' OR cnt = (SELECT max(cnt) FROM scored)
    ),
    fs_top AS (SELECT l, r FROM at_top WHERE $order::VARCHAR = 'first-seen'),
    first_words AS (  -- first-seen: the words holding them now (unmerged words as before)
        SELECT a.l, a.r, o.w FROM fs_top a JOIN tc_wp_occ o ON o.l = a.l AND o.r = a.r
        WHERE o.w NOT IN (SELECT w FROM seg)
        UNION ALL
        SELECT a.l, a.r, sg.w FROM fs_top a JOIN seg sg
            ON contains(sg.s, ',' || a.l || ',,' || a.r || ',')
    ),
    lex_top AS (  -- lexical-max: their strings
        SELECT a.l, a.r, nl.token AS ltok, nr.token AS rtok
        FROM (SELECT l, r FROM at_top WHERE $order::VARCHAR = 'lexical-max') a
        JOIN names nl ON nl.id = a.l
        JOIN names nr ON nr.id = a.r
    ),
    keyed AS (
        SELECT a.*, coalesce(x.ltok, '') AS ltok, coalesce(x.rtok, '') AS rtok, f.fw
        FROM at_top a
        LEFT JOIN lex_top x ON x.l = a.l AND x.r = a.r
        LEFT JOIN (SELECT l, r, min(w) AS fw FROM first_words GROUP BY l, r) f
            ON f.l = a.l AND f.r = a.r
    ),
    keyed_pos AS (  -- first-seen: their first positions (fw is NULL in the other orders)
        SELECT k.l, k.r, strpos(coalesce(sg.s, t.s), ',' || k.l || ',,' || k.r || ',') AS pos
        FROM (SELECT l, r, fw FROM keyed WHERE fw IS NOT NULL) k
        JOIN tc_wp_seg t ON t.w = k.fw
        LEFT JOIN seg sg ON sg.w = k.fw
    ),
    best_changed AS (
        SELECT k.*, p.pos, 1 AS src
        FROM keyed k LEFT JOIN keyed_pos p ON p.l = k.l AND p.r = k.r
        ORDER BY score DESC, cnt DESC, ltok DESC, rtok DESC, fw, pos, l, r
        LIMIT 1
    ),
    top AS (
        SELECT * FROM (SELECT * FROM unaff UNION ALL BY NAME SELECT * FROM best_changed)
        ORDER BY score DESC, cnt DESC, ltok DESC, rtok DESC, fw, pos, l, r
        LIMIT 1
    ),
    last_cand AS (  -- present when tc_wp_cand is full (pairs beyond it rank below it)
        SELECT score, cnt, l, r, ltok, rtok FROM tc_wp_cand WHERE i = $n::INTEGER - 1
    ),
    chosen AS (  -- the best pair now, when it is known, and it scores at least min_score
                 -- (first-seen: a first position is compared only within one chain state,
                 -- so above the last candidate means a greater count)
        SELECT t.* FROM top t LEFT JOIN last_cand x ON true
        WHERE (t.src = 0 OR (SELECT count(*) FROM unaff) > 0 OR x.l IS NULL
               OR CASE $order::VARCHAR
                  WHEN 'likelihood' THEN (t.score, t.cnt, -t.l, -t.r) > (x.score, x.cnt, -x.l, -x.r)
                  WHEN 'lexical-max' THEN (t.cnt, t.ltok, t.rtok) > (x.cnt, x.ltok, x.rtok)
                  ELSE t.cnt > x.cnt END)
          AND ($min_score::DOUBLE IS NULL OR t.score >= $min_score::DOUBLE)
    ),
    mtok AS (
        SELECT c.*, nl.blen AS lblen, nr.blen AS rblen,
               nl.token || CASE WHEN starts_with(nr.token, $prefix::VARCHAR)
                                THEN nr.token[length($prefix::VARCHAR) + 1:]
                                ELSE nr.token END AS tok
        FROM chosen c
        JOIN names nl ON nl.id = c.l
        JOIN names nr ON nr.id = c.r
    ),
    mrg AS (  -- the merge: a = l, b = r, its new (or existing) id n
        SELECT m.*, coalesce(x.id, $vocab_n::INTEGER + ctl.used::INTEGER) AS n,
               x.id IS NULL AS fresh, ctl.i, ctl.merges, ctl.used
        FROM mtok m CROSS JOIN ctl LEFT JOIN names x ON x.token = m.tok
    ),
    pat AS (
        SELECT ',' || l || ',,' || r || ',' AS pat, ',' || n || ',' AS rep, l, r FROM mrg
    ),
    hit AS (  -- the words holding the pair now
        SELECT s.w, s.wc, s.s FROM seg s, pat WHERE contains(s.s, pat.pat)
        UNION ALL
        SELECT t.w, t.wc, t.s
        FROM tc_wp_occ o
        JOIN pat ON o.l = pat.l AND o.r = pat.r
        JOIN tc_wp_seg t ON t.w = o.w
        WHERE o.w NOT IN (SELECT w FROM seg)
    ),
    upd AS (
        SELECT h.w, h.wc, h.s AS old, replace(h.s, pat.pat, pat.rep) AS new FROM hit h, pat
    ),
    tot AS (
        SELECT sum(wc * (len(tc_wp_ids(old)) - len(tc_wp_ids(new))))::BIGINT AS m,
               count(*)::BIGINT AS words
        FROM upd
    ),
    dpairs AS (  -- the words' pairs after minus before, times the word count
        SELECT p.l, p.r, sum(sg * wc)::BIGINT AS d
        FROM (SELECT wc, sg, unnest(tc_wp_pairs_of(tc_wp_ids(x))) AS p
              FROM (SELECT wc, 1 AS sg, new AS x FROM upd
                    UNION ALL SELECT wc, -1 AS sg, old AS x FROM upd))
        GROUP BY p.l, p.r
    ),
    tdnew AS (
        SELECT unnest([m.l, m.r, m.n]) AS id, unnest([-t.m, -t.m, t.m]) AS d,
               unnest([m.lblen, m.rblen, m.blen]) AS blen,
               unnest([NULL, NULL, CASE WHEN m.fresh THEN m.tok END]) AS tok
        FROM mrg m, tot t
    )
    -- the new state (nothing when no merge was made: the recursion ends)
    SELECT m.i + 1, 'ctl', NULL, NULL, NULL, NULL, NULL, NULL, m.used + m.fresh::INTEGER,
           m.merges + 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM mrg m
    UNION ALL
    SELECT m.i + 1, 'seg', x.w, x.wc, x.s, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL
    FROM (SELECT w, wc, s FROM seg WHERE w NOT IN (SELECT w FROM upd)
          UNION ALL SELECT w, wc, new FROM upd) x, mrg m
    UNION ALL
    SELECT m.i + 1, 'pd', NULL, NULL, NULL, x.l, x.r, NULL, x.d, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL
    FROM (SELECT l, r, sum(d)::BIGINT AS d
          FROM (SELECT l, r, d FROM pd UNION ALL SELECT l, r, d FROM dpairs)
          GROUP BY l, r HAVING sum(d) <> 0) x, mrg m
    UNION ALL
    SELECT m.i + 1, 'td', NULL, NULL, NULL, NULL, NULL, x.id, x.d, NULL, NULL, NULL, NULL,
           x.blen, x.tok, NULL, NULL, NULL
    FROM (SELECT id, sum(d)::BIGINT AS d, max(blen) AS blen, max(tok) AS tok
          FROM (SELECT id, d, blen, tok FROM td UNION ALL SELECT id, d, blen, tok FROM tdnew)
          GROUP BY id) x, mrg m
    UNION ALL  -- each step's merge (not copied on: read from every step below)
    SELECT m.i + 1, 'log', NULL, NULL, NULL, m.l, m.r, m.n, NULL, m.cnt, m.score, m.lc, m.rc,
           m.blen, m.tok, m.fresh, $merges_n::INTEGER + m.merges::INTEGER, t.words
    FROM mrg m, tot t)
)
SELECT * FROM st WHERE i = (SELECT max(i) FROM st) OR kind = 'log';

-- name: apply
UPDATE tc_wp_seg SET s = c.s
FROM tc_wp_chain c
WHERE c.kind = 'seg' AND tc_wp_seg.w = c.w;
DELETE FROM tc_wp_occ WHERE w IN (SELECT w FROM tc_wp_chain WHERE kind = 'seg');
INSERT INTO tc_wp_occ
SELECT DISTINCT p.l, p.r, w
FROM (SELECT w, unnest(tc_wp_pairs_of(tc_wp_ids(s))) AS p FROM tc_wp_chain
      WHERE kind = 'seg');
MERGE INTO tc_wp_pairs t
USING (SELECT l, r, d FROM tc_wp_chain WHERE kind = 'pd') u
ON t.l = u.l AND t.r = u.r
WHEN MATCHED THEN UPDATE SET cnt = t.cnt + u.d
WHEN NOT MATCHED THEN INSERT VALUES (u.l, u.r, u.d);
MERGE INTO tc_wp_tok t
USING (SELECT n AS id, d, blen FROM tc_wp_chain WHERE kind = 'td') u
ON t.id = u.id
WHEN MATCHED THEN UPDATE SET cnt = t.cnt + u.d
WHEN NOT MATCHED THEN INSERT VALUES (u.id, u.d, u.blen);
INSERT INTO tc_vocab
SELECT n, tok, 'merge', blen FROM tc_wp_chain WHERE kind = 'td' AND tok IS NOT NULL ORDER BY n;
INSERT INTO tc_wp_log
SELECT rk, l, r, n, cnt, score, words, lc, rc FROM tc_wp_chain WHERE kind = 'log' ORDER BY rk;

-- name: made
SELECT cnt AS merges, d AS fresh FROM tc_wp_chain WHERE kind = 'ctl';

-- name: words_out
SELECT w.word, w.count, w.first_seen, coalesce(t.tokens, []::VARCHAR[]) AS tokens,
       tc_wp_ids(s.s)::UINTEGER[] AS ids
FROM tc_words w
JOIN tc_wp_seg s USING (w)
LEFT JOIN (
    SELECT u.w, list(v.token ORDER BY u.i) AS tokens
    FROM (SELECT w, unnest(tc_wp_ids(s)) AS id, unnest(range(len(tc_wp_ids(s)))) AS i
          FROM tc_wp_seg) u
    JOIN tc_vocab v USING (id)
    GROUP BY u.w
) t USING (w)
ORDER BY w.w;

-- name: merges_out
SELECT m.rank::UINTEGER AS rank, vl.token AS "left", vr.token AS "right", vn.token AS token,
       m.left_id::UINTEGER AS left_id, m.right_id::UINTEGER AS right_id, m.id::UINTEGER AS id,
       m.count::UBIGINT AS count, m.score AS score, m.words::UBIGINT AS words,
       m.left_count::UBIGINT AS left_count, m.right_count::UBIGINT AS right_count
FROM tc_wp_log m
JOIN tc_vocab vl ON vl.id = m.left_id
JOIN tc_vocab vr ON vr.id = m.right_id
JOIN tc_vocab vn ON vn.id = m.id
ORDER BY m.rank;

-- name: vocab_out
SELECT v.id::UINTEGER AS id, v.token, v.kind, r.rank::UINTEGER AS rank
FROM tc_vocab v
LEFT JOIN (SELECT id, min(rank) AS rank FROM tc_wp_log GROUP BY id) r USING (id)
ORDER BY v.id;
