-- Stage 8: the merge queue's hot/cold split.
--
-- HF keeps every entry in one binary heap. Here the entries live in two tables: tc_items_hot
-- holds every entry queued with a count (stale) >= $theta, with its pair's current count (cnt)
-- kept up to date by each pass; tc_items_cold holds the rest, without current counts (those
-- live in tc_pairs + tc_pending). An entry's place in the queue never beats its queued count, so
-- while the best hot entry's effective count is >= theta no cold entry can come first.
-- When it drops below, `refill` lowers theta and moves the next entries over.
--
-- In:  tc_items_cold, tc_items_hot, tc_pairs, tc_pending; $h (how many entries to move), $theta.
-- Out: tc_pairs with the pending changes folded in; entries with stale >= $theta moved to hot.

-- name: flush
CREATE OR REPLACE TABLE tc_pairs AS
SELECT key, sum(cnt)::BIGINT AS cnt
FROM (SELECT key, cnt FROM tc_pairs UNION ALL SELECT key, d AS cnt FROM tc_pending)
GROUP BY key;
DELETE FROM tc_pending;

-- name: threshold
-- The queued count of the $h-th best cold entry (NULL when fewer remain: move them all).
SELECT stale FROM tc_items_cold ORDER BY stale DESC LIMIT 1 OFFSET $h;

-- name: refill
-- Entries used up by a merge are dropped from hot, and hot entries queued below the new
-- threshold go back to cold (they cannot come first until theta drops below them again).
DELETE FROM tc_items_hot WHERE cnt = -4611686018427387904;
INSERT INTO tc_items_cold SELECT eid, key, stale, ws FROM tc_items_hot WHERE stale < $theta;
DELETE FROM tc_items_hot WHERE stale < $theta;
INSERT INTO tc_items_hot
SELECT c.eid, c.key, c.stale, coalesce(p.cnt, 0), c.ws
FROM tc_items_cold c LEFT JOIN tc_pairs p USING (key)
WHERE c.stale >= $theta;
DELETE FROM tc_items_cold WHERE stale >= $theta;

-- name: drop_dead
-- lexical-max: an entry whose pair count reached 0 can never be chosen again.
DELETE FROM tc_items_hot WHERE cnt <= 0;

-- name: sizes
SELECT (SELECT count(*) FROM tc_items_hot) AS hot, (SELECT count(*) FROM tc_items_cold) AS cold;
