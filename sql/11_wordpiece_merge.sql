-- Stage 11: WordPiece likelihood merge passes and the result tables.
--
-- In:  the tables of stage 10 (tc_wp_seg, tc_wp_tok, tc_wp_pairs, tc_wp_occ, ...), tc_vocab,
--      tc_words; per pass, the members chosen by the engine (`members`: one list per column,
--      k = 0, 1, ... in merge order). Members share no token (a, b, and the new token when it
--      already exists), so each one's changes can be computed alone from the state before the
--      pass, and they add up.
-- Out: `members` fills tc_wp_m; `work` fills tc_wp_work (every word holding a member's pair:
--      its symbols before and after that member's merge alone, and how many occurrences it
--      merged) and tc_wp_delta (each member's pair-count changes: the word's pairs after minus
--      before, times the word count). Stage 10's `summary` reads them; the engine then keeps
--      the members before the cut (`cut`), and `apply` writes them: tc_wp_seg (all kept
--      members of a word, in order), tc_wp_occ, tc_wp_pairs, tc_wp_tok, tc_vocab (new tokens,
--      kind 'merge') and tc_wp_log (one row per merge: pair, new id, pair count, score, words
--      touched, the two token counts the score was computed from).
--      `words_out`, `merges_out`, `vocab_out`: the result tables, with the Polars engine's
--      schemas (merges: ... count UBIGINT, score DOUBLE, words UBIGINT, left_count UBIGINT,
--      right_count UBIGINT).

-- name: members
DELETE FROM tc_wp_m;
INSERT INTO tc_wp_m
SELECT k, rank, a, b, n, fresh, tok, blen, cnt, score, lc, rc,
       ',' || a || ',,' || b || ',' AS pat, ',' || n || ',' AS rep
FROM (SELECT unnest($k::INTEGER[]) AS k, unnest($rank::INTEGER[]) AS rank,
             unnest($a::INTEGER[]) AS a, unnest($b::INTEGER[]) AS b,
             unnest($n::INTEGER[]) AS n, unnest($fresh::BOOLEAN[]) AS fresh,
             unnest($tok::VARCHAR[]) AS tok, unnest($blen::INTEGER[]) AS blen,
             unnest($cnt::BIGINT[]) AS cnt, unnest($score::DOUBLE[]) AS score,
             unnest($lc::BIGINT[]) AS lc, unnest($rc::BIGINT[]) AS rc);

-- name: work
DELETE FROM tc_wp_work;
INSERT INTO tc_wp_work
SELECT k, w, wc, old, new, len(tc_wp_ids(old)) - len(tc_wp_ids(new)) AS nm
FROM (SELECT m.k, s.w, s.wc, s.s AS old, replace(s.s, m.pat, m.rep) AS new
      FROM tc_wp_m m
      JOIN tc_wp_occ o ON o.l = m.a AND o.r = m.b
      JOIN tc_wp_seg s ON s.w = o.w);
DELETE FROM tc_wp_delta;
INSERT INTO tc_wp_delta
SELECT k, p.l, p.r, sum(sg * wc)::BIGINT AS d
FROM (SELECT k, wc, sg, unnest(tc_wp_pairs_of(tc_wp_ids(s))) AS p
      FROM (SELECT k, wc, 1 AS sg, new AS s FROM tc_wp_work
            UNION ALL
            SELECT k, wc, -1 AS sg, old AS s FROM tc_wp_work))
GROUP BY k, p.l, p.r
HAVING sum(sg * wc) <> 0;

-- name: cut
DELETE FROM tc_wp_m WHERE k >= $kstar::INTEGER;

-- name: apply
UPDATE tc_wp_seg SET s = u.s
FROM (SELECT x.w,
             list_reduce(list({'p': m.pat, 'q': m.rep} ORDER BY m.k),
                         lambda acc, e: replace(acc, e.p, e.q), any_value(x.old)) AS s
      FROM tc_wp_work x JOIN tc_wp_m m USING (k)
      GROUP BY x.w) u
WHERE tc_wp_seg.w = u.w;
DELETE FROM tc_wp_occ
WHERE w IN (SELECT x.w FROM tc_wp_work x JOIN tc_wp_m m USING (k));
INSERT INTO tc_wp_occ
SELECT DISTINCT p.l, p.r, w
FROM (SELECT w, unnest(tc_wp_pairs_of(tc_wp_ids(s))) AS p
      FROM tc_wp_seg
      WHERE w IN (SELECT x.w FROM tc_wp_work x JOIN tc_wp_m m USING (k)));
MERGE INTO tc_wp_pairs t
USING (SELECT d.l, d.r, sum(d.d)::BIGINT AS d
       FROM tc_wp_delta d JOIN tc_wp_m m USING (k)
       GROUP BY d.l, d.r) u
ON t.l = u.l AND t.r = u.r
WHEN MATCHED THEN UPDATE SET cnt = t.cnt + u.d
WHEN NOT MATCHED THEN INSERT VALUES (u.l, u.r, u.d);
MERGE INTO tc_wp_tok t
USING (SELECT id, sum(d)::BIGINT AS d, max(blen) AS blen
       FROM (SELECT unnest([m.a, m.b, m.n]) AS id, unnest([-g.m, -g.m, g.m]) AS d,
                    unnest([NULL, NULL, m.blen]) AS blen
             FROM tc_wp_m m
             JOIN (SELECT k, sum(wc * nm)::BIGINT AS m FROM tc_wp_work GROUP BY k) g
               USING (k))
       GROUP BY id) u
ON t.id = u.id
WHEN MATCHED THEN UPDATE SET cnt = t.cnt + u.d
WHEN NOT MATCHED THEN INSERT VALUES (u.id, u.d, u.blen);
INSERT INTO tc_vocab
SELECT n, tok, 'merge', blen FROM tc_wp_m WHERE fresh ORDER BY k;
INSERT INTO tc_wp_log
SELECT m.rank, m.a, m.b, m.n, m.cnt, m.score, g.words, m.lc, m.rc
FROM tc_wp_m m
JOIN (SELECT k, count(*)::BIGINT AS words FROM tc_wp_work GROUP BY k) g USING (k)
ORDER BY m.k;

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
