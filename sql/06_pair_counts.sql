-- Stage 6: pair counting — the initial pair counts and the merge queue.
--
-- In:  tc_seg(w, wc, syms, st), tc_vocab; $max_token_length BIGINT (NULL = no limit: a pair
--      whose two tokens together exceed it, prefix/suffix not counted, is never counted).
-- Out: tc_pairs(key BIGINT, cnt BIGINT)   the pair counts, key = left_id << 32 | right_id, so
--                                         key order is the `id` tie-break order;
--      tc_items_cold(eid, key, stale, ws)  one queue entry per pair (HF's `Merge`): eid its
--                                         creation order (eid = key for these), stale the count
--                                         it was queued with, ws the words it
--                                         was created for (HF merges an entry only there);
--      tc_items_hot (same + cnt, the current count), tc_pending(key, d), tc_multi(key),
--      tc_merges_log, tc_pass: empty, filled by the merge passes (stages 7, 8);
--      tc_vocab is renamed tc_vocab_base (stage 7 makes tc_vocab a view with the new tokens).
-- Every queue entry starts "cold"; the merge loop moves the best ones to the small hot table.

-- name: pairs
CREATE OR REPLACE TABLE tc_items_cold AS
WITH occurrences AS (
    SELECT w, wc, syms[j] AS l, syms[j + 1] AS r
    FROM (SELECT w, wc, syms, unnest(range(1, len(syms))) AS j FROM tc_seg)
),
eligible AS (
    SELECT o.* FROM occurrences o
    JOIN tc_vocab vl ON vl.id = o.l
    JOIN tc_vocab vr ON vr.id = o.r
    WHERE $max_token_length::BIGINT IS NULL OR vl.blen + vr.blen <= $max_token_length::BIGINT
),
per_word AS (
    SELECT (l::BIGINT << 32) | r AS key, w, sum(wc) AS cnt
    FROM eligible
    GROUP BY ALL
)
SELECT key::HUGEINT AS eid, key, sum(cnt)::BIGINT AS stale, list(w ORDER BY w) AS ws
FROM per_word
GROUP BY key;

-- name: tables
CREATE OR REPLACE TABLE tc_pairs AS SELECT key, stale AS cnt FROM tc_items_cold;
CREATE OR REPLACE TABLE tc_items_hot (eid HUGEINT, key BIGINT, stale BIGINT, cnt BIGINT,
                                      ws INTEGER[]);
CREATE OR REPLACE TABLE tc_pending (key BIGINT, d BIGINT);
CREATE OR REPLACE TABLE tc_multi (key BIGINT);
-- the merges, and the tokens they create (tc_vocab becomes a view: tc_vocab_base + these)
CREATE OR REPLACE TABLE tc_merges_log (rank INTEGER, left_id INTEGER, right_id INTEGER,
                                       id INTEGER, count BIGINT, words BIGINT, tok VARCHAR,
                                       blen INTEGER, fresh BOOLEAN);
ALTER TABLE tc_vocab RENAME TO tc_vocab_base;
-- what one merge pass changes (stage 7, `compute`), one row per change
CREATE OR REPLACE TABLE tc_pass (kind VARCHAR, w INTEGER, syms INTEGER[], st INTEGER[],
                                 eid HUGEINT, key BIGINT, stale BIGINT, cnt BIGINT,
                                 ws INTEGER[], d BIGINT, k INTEGER, a INTEGER, b INTEGER,
                                 new_id INTEGER, words BIGINT, tok VARCHAR, blen INTEGER,
                                 fresh BOOLEAN);
