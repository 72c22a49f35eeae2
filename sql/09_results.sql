-- Stage 9: the result tables (same schemas as the Polars engine; docs/architecture.md, "Tables").
--
-- In:  tc_words, tc_seg, tc_vocab, tc_merges_log.
-- Out: three queries:
--   words_out:  word, count UBIGINT, first_seen UBIGINT, tokens VARCHAR[], ids UINTEGER[]
--               (the final segmentation of every word, in first-seen order);
--   merges_out: rank UINTEGER, left, right, token, left_id, right_id, id UINTEGER,
--               count UBIGINT (pair count when chosen), score DOUBLE (NULL for BPE),
--               words UBIGINT (distinct words the merge touched);
--   vocab_out:  id UINTEGER, token, kind ('special' | 'alphabet' | 'variant' | 'merge'),
--               rank UINTEGER (first merge that produced the id; NULL otherwise).

-- name: words_out
SELECT w.word, w.count, w.first_seen, coalesce(t.tokens, []::VARCHAR[]) AS tokens,
       s.syms::UINTEGER[] AS ids
FROM tc_words w
JOIN tc_seg s USING (w)
LEFT JOIN (
    SELECT u.w, list(v.token ORDER BY u.i) AS tokens
    FROM (SELECT w, unnest(syms) AS id, unnest(range(len(syms))) AS i FROM tc_seg) u
    JOIN tc_vocab v USING (id)
    GROUP BY u.w
) t USING (w)
ORDER BY w.w;

-- name: merges_out
SELECT m.rank::UINTEGER AS rank, vl.token AS "left", vr.token AS "right", vn.token AS token,
       m.left_id::UINTEGER AS left_id, m.right_id::UINTEGER AS right_id, m.id::UINTEGER AS id,
       m.count::UBIGINT AS count, NULL::DOUBLE AS score, m.words::UBIGINT AS words
FROM tc_merges_log m
JOIN tc_vocab vl ON vl.id = m.left_id
JOIN tc_vocab vr ON vr.id = m.right_id
JOIN tc_vocab vn ON vn.id = m.id
ORDER BY m.rank;

-- name: vocab_out
SELECT v.id::UINTEGER AS id, v.token, v.kind, r.rank::UINTEGER AS rank
FROM tc_vocab v
LEFT JOIN (SELECT id, min(rank) AS rank FROM tc_merges_log GROUP BY id) r USING (id)
ORDER BY v.id;
