-- Stage 6: pair counting — the initial pair counts and the merge queue.
--
-- In:  tc_seg(w, wc, syms, st), tc_vocab; $max_token_length INTEGER (NULL = no limit: a pair
--      whose two tokens together exceed it, prefix/suffix not counted, is never counted).
-- Out: tc_pairs(key BIGINT, cnt BIGINT)   the pair counts, key = left_id << 32 | right_id, so
--                                         key order is the `id` tie-break order;
--      tc_items_cold(eid, key, stale, fs, ws)  one queue entry per pair (HF's `Merge`): eid its
--                                         creation order, stale the count it was queued with,
--                                         (eid = key for these), fs its first occurrence (w << 32 | st), ws the words it
--                                         was created for (HF merges an entry only there);
--      tc_items_hot (same + cnt, the current count), tc_pending(key, d), tc_multi(key),
--      tc_merges_log: empty, filled by the merge passes (07, 08); the passes' working tables
--      tc_state, tc_batch, tc_xw, tc_occ, tc_ch_t, tc_new_reuse.
-- Every queue entry starts "cold"; the merge loop moves the best ones to the small hot table.

-- name: pairs
CREATE OR REPLACE TABLE tc_items_cold AS
WITH occurrences AS (
    SELECT w, wc, syms[j] AS l, syms[j + 1] AS r, st[j] AS pos
    FROM (SELECT w, wc, syms, st, unnest(range(1, len(syms))) AS j FROM tc_seg)
),
eligible AS (
    SELECT o.* FROM occurrences o
    JOIN tc_vocab vl ON vl.id = o.l
    JOIN tc_vocab vr ON vr.id = o.r
    WHERE $max_token_length::INTEGER IS NULL OR vl.blen + vr.blen <= $max_token_length::INTEGER
),
per_word AS (
    SELECT (l::BIGINT << 32) | r AS key, w, sum(wc) AS cnt, min(pos) AS pos
    FROM eligible
    GROUP BY ALL
)
SELECT key::HUGEINT AS eid, key, sum(cnt)::BIGINT AS stale,
       min((w::BIGINT << 32) | pos) AS fs, list(w ORDER BY w) AS ws
FROM per_word
GROUP BY key;

-- name: tables
CREATE OR REPLACE TABLE tc_pairs AS SELECT key, stale AS cnt FROM tc_items_cold;
CREATE OR REPLACE TABLE tc_items_hot (eid HUGEINT, key BIGINT, stale BIGINT, cnt BIGINT, fs BIGINT,
                                      ws INTEGER[]);
CREATE OR REPLACE TABLE tc_pending (key BIGINT, d BIGINT);
CREATE OR REPLACE TABLE tc_multi (key BIGINT);
CREATE OR REPLACE TABLE tc_merges_log (rank INTEGER, left_id INTEGER, right_id INTEGER,
                                       id INTEGER, count BIGINT, words BIGINT);
-- the merge passes' working tables (stage 7)
CREATE OR REPLACE TABLE tc_state (kstar INTEGER, pass BIGINT);
INSERT INTO tc_state VALUES (0, 0);
CREATE OR REPLACE TABLE tc_batch (k INTEGER, role VARCHAR, r INTEGER, eid HUGEINT, key BIGINT,
                                  a INTEGER, b INTEGER, eff BIGINT, stale BIGINT, cnt BIGINT,
                                  new_id INTEGER, new_blen INTEGER, tok VARCHAR, fresh BOOLEAN);
CREATE OR REPLACE TABLE tc_xw (w INTEGER, wc BIGINT, s INTEGER[], st INTEGER[]);
CREATE OR REPLACE TABLE tc_occ (w INTEGER, j INTEGER, k INTEGER, new_id INTEGER);
CREATE OR REPLACE TABLE tc_ch_t (k INTEGER, w INTEGER, key BIGINT, d BIGINT, plus BOOLEAN,
                                 pos INTEGER);
CREATE OR REPLACE TABLE tc_new_reuse (eid HUGEINT, key BIGINT, stale BIGINT, cnt BIGINT,
                                      fs BIGINT, ws INTEGER[]);
