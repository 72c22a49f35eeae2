-- Stage 7: one merge pass — merge one pair, or a batch of pairs chosen together, everywhere
-- its queue entry says, and update counts and queue.
--
-- In:  tc_seg, tc_vocab, tc_items_hot (the best queue entries), tc_pending/tc_pairs (counts);
--      tc_batch (from the `batch` section): the pass's table of pairs, one row per member
--      ('m', k = 0, 1, ... in merge order) or deferred candidate ('d'); each with its queue entry
--      (eid, key = a << 32 | b, eff, stale, cnt) and the id and length of the new token.
-- Out: tc_seg rewritten for the words touched, tc_merges_log and tc_vocab appended, counts
--      changed in tc_pending and tc_items_hot, the members' entries removed, new entries queued
--      (tc_items_hot / tc_items_cold), as HuggingFace's BpeTrainer would after merging the
--      members one after the other (DESIGN.md §3-4).
--
-- Exact semantics, per member k, in order:
--   * occurrences: in the words its queue entry was created for, every (a, b), left to right
--     (`a a a` merges the first two; `a a a a` both pairs);
--   * changes (HF Word::merge): for each occurrence, with L the symbol on its left as it stands
--     after the members <= k, and R the symbol on its right after the members < k:
--       (L, a) -wc, (L, new) +wc, (b, R) -wc, (new, R) +wc
--     (the merged pair itself keeps its count in the default `id` mode, as HF);
--   * every pair with a +change gets a new queue entry (HF where_to_update) for those words,
--     queued with its count right after member k, if that count is positive.
-- The batch is exact: members never share a symbol the wrong way round (no member's left is an
-- earlier right, no right an earlier left), and `cut` keeps only the prefix of members that no
-- new pair or deferred candidate could overtake at its turn.
-- Parameters: $n (candidates), $prefix, $kstar (members kept), $theta (hot threshold),
--             $pass (pass number, for new eids), $rank0 (rank of member 0), $max_token_length.

-- name: candidates_id
-- The best queue entries in HF order: effective count least(queued, current) descending (a
-- lazily re-queued entry whose count went up meanwhile still pops at its old count), then the
-- smallest pair, then the oldest entry.
WITH top AS (
    SELECT eid, key, stale, cnt, least(stale, cnt) AS eff
    FROM tc_items_hot
    ORDER BY eff DESC, key, eid
    LIMIT $n
),
named AS (
    SELECT top.*, (key >> 32)::INTEGER AS a, (key & 4294967295)::INTEGER AS b,
           vl.token || CASE WHEN coalesce($prefix::VARCHAR, '') <> ''
                                 AND starts_with(vr.token, $prefix::VARCHAR)
                            THEN substr(vr.token, length($prefix::VARCHAR) + 1)
                            ELSE vr.token END AS tok,
           vl.blen + vr.blen AS blen
    FROM top
    JOIN tc_vocab vl ON vl.id = (top.key >> 32)
    JOIN tc_vocab vr ON vr.id = (top.key & 4294967295)
)
SELECT named.eid, named.key, named.a, named.b, named.stale, named.cnt, named.eff, named.tok,
       named.blen, ve.id AS reuse_id, ve.blen AS reuse_blen,
       named.key IN (SELECT key FROM tc_multi) AS multi, NULL::BIGINT AS fs
FROM named LEFT JOIN tc_vocab ve ON ve.token = named.tok
ORDER BY named.eff DESC, named.key, named.eid;

-- name: candidates_lexical
-- subword-nmt order: highest count, then the greatest (left, right) strings.
WITH named AS (
    SELECT h.eid, h.key, h.stale, h.cnt, h.cnt AS eff, (h.key >> 32)::INTEGER AS a,
           (h.key & 4294967295)::INTEGER AS b, vl.token AS ltok, vr.token AS rtok,
           vl.blen + vr.blen AS blen
    FROM tc_items_hot h
    JOIN tc_vocab vl ON vl.id = (h.key >> 32)
    JOIN tc_vocab vr ON vr.id = (h.key & 4294967295)
    WHERE h.cnt > 0
),
top AS (SELECT * FROM named ORDER BY cnt DESC, ltok DESC, rtok DESC LIMIT $n),
toks AS (
    SELECT top.*, ltok || CASE WHEN coalesce($prefix::VARCHAR, '') <> ''
                                    AND starts_with(rtok, $prefix::VARCHAR)
                               THEN substr(rtok, length($prefix::VARCHAR) + 1)
                               ELSE rtok END AS tok
    FROM top
)
SELECT toks.eid, toks.key, toks.a, toks.b, toks.stale, toks.cnt, toks.eff, toks.tok, toks.blen,
       ve.id AS reuse_id, ve.blen AS reuse_blen, false AS multi, NULL::BIGINT AS fs
FROM toks LEFT JOIN tc_vocab ve ON ve.token = toks.tok
ORDER BY toks.cnt DESC, toks.ltok DESC, toks.rtok DESC;

-- name: candidates_first_seen
-- Seed-code order: highest count, then the pair whose first occurrence comes first. fs is a lower
-- bound of the first occurrence; the engine validates the leaders with `first_seen_actual`.
WITH top AS (
    SELECT eid, key, stale, cnt, cnt AS eff, fs FROM tc_items_hot
    WHERE cnt > 0
    ORDER BY cnt DESC, fs, eid
    LIMIT $n
),
named AS (
    SELECT top.*, (key >> 32)::INTEGER AS a, (key & 4294967295)::INTEGER AS b,
           vl.token || CASE WHEN coalesce($prefix::VARCHAR, '') <> ''
                                 AND starts_with(vr.token, $prefix::VARCHAR)
                            THEN substr(vr.token, length($prefix::VARCHAR) + 1)
                            ELSE vr.token END AS tok,
           vl.blen + vr.blen AS blen
    FROM top
    JOIN tc_vocab vl ON vl.id = (top.key >> 32)
    JOIN tc_vocab vr ON vr.id = (top.key & 4294967295)
)
SELECT named.eid, named.key, named.a, named.b, named.stale, named.cnt, named.eff, named.tok,
       named.blen, ve.id AS reuse_id, ve.blen AS reuse_blen, false AS multi, named.fs
FROM named LEFT JOIN tc_vocab ve ON ve.token = named.tok
ORDER BY named.cnt DESC, named.fs, named.eid;

-- name: first_seen_actual
-- The true first occurrence (w << 32 | st) of the queue entries $eids, stored back into fs.
CREATE OR REPLACE TEMP TABLE tc_fs AS
WITH e AS (
    SELECT h.eid, (h.key >> 32)::INTEGER AS a, (h.key & 4294967295)::INTEGER AS b,
           unnest(h.ws) AS w
    FROM tc_items_hot h
    WHERE h.eid IN (SELECT unnest($eids::BIGINT[]))
),
x AS (
    SELECT s.w, unnest(s.syms) AS s, unnest(s.st) AS st, unnest(range(len(s.syms))) AS i
    FROM tc_seg s WHERE s.w IN (SELECT w FROM e)
),
x2 AS (SELECT *, lead(s) OVER (PARTITION BY w ORDER BY i) AS s2 FROM x)
SELECT e.eid, min((x2.w::BIGINT << 32) | x2.st) AS fs
FROM e JOIN x2 ON x2.w = e.w AND x2.s = e.a AND x2.s2 = e.b
GROUP BY e.eid;
UPDATE tc_items_hot SET fs = f.fs FROM tc_fs f WHERE tc_items_hot.eid = f.eid;
SELECT eid, fs FROM tc_fs;

-- name: batch
CREATE OR REPLACE TEMP TABLE tc_batch AS
SELECT unnest($k::INTEGER[]) AS k, unnest($role::VARCHAR[]) AS role, unnest($r::INTEGER[]) AS r,
       unnest($eid::BIGINT[]) AS eid, unnest($key::BIGINT[]) AS key,
       unnest($a::INTEGER[]) AS a, unnest($b::INTEGER[]) AS b, unnest($eff::BIGINT[]) AS eff,
       unnest($stale::BIGINT[]) AS stale, unnest($cnt::BIGINT[]) AS cnt,
       unnest($new_id::INTEGER[]) AS new_id, unnest($new_blen::INTEGER[]) AS new_blen,
       unnest($tok::VARCHAR[]) AS tok, unnest($fresh::BOOLEAN[]) AS fresh;

-- name: gather
-- The members' words (tc_mw) and their symbols, one row per symbol (tc_x).
CREATE OR REPLACE TEMP TABLE tc_mw AS
SELECT b.k, unnest(h.ws) AS w
FROM tc_batch b JOIN tc_items_hot h USING (eid)
WHERE b.role = 'm';
CREATE OR REPLACE TEMP TABLE tc_x AS
SELECT s.w, s.wc, unnest(s.syms) AS s, unnest(s.st) AS st,
       unnest(range(len(s.syms)))::INTEGER AS i
FROM tc_seg s
WHERE s.w IN (SELECT w FROM tc_mw);

-- name: occurrences
-- Where each member merges: (w, i) of the left symbol, runs of a == b taken left to right.
CREATE OR REPLACE TEMP TABLE tc_occ AS
WITH x2 AS (SELECT w, i, s, lead(s) OVER (PARTITION BY w ORDER BY i) AS s2 FROM tc_x),
hits AS (
    SELECT x2.w, x2.i, b.k
    FROM x2
    JOIN tc_batch b ON b.role = 'm' AND b.a = x2.s AND b.b = x2.s2
    SEMI JOIN tc_mw mw ON mw.k = b.k AND mw.w = x2.w
),
runs AS (SELECT w, i, k, i - row_number() OVER (PARTITION BY w, k ORDER BY i) AS g FROM hits),
kept AS (SELECT w, i, k, row_number() OVER (PARTITION BY w, k, g ORDER BY i) AS rn FROM runs)
SELECT w, i, k FROM kept WHERE rn % 2 = 1;

-- name: changes
-- HF's pair-count changes of every occurrence, with the member that makes them (k) and the
-- position of the pair's left symbol (pos = st, for first occurrences).
CREATE OR REPLACE TEMP TABLE tc_ch AS
WITH o AS (
    SELECT o.w, o.i, o.k, b.a, b.b, b.new_id, x0.wc, x0.st, xb.st AS b_st,
           xl.s AS l_old, xl.st AS l_st, ol.k AS lk, bl.new_id AS l_new, xll.st AS ll_st,
           xr.s AS r_old, orr.k AS rk, br.new_id AS r_new
    FROM tc_occ o
    JOIN tc_batch b ON b.role = 'm' AND b.k = o.k
    JOIN tc_x x0 ON x0.w = o.w AND x0.i = o.i
    JOIN tc_x xb ON xb.w = o.w AND xb.i = o.i + 1
    LEFT JOIN tc_x xl ON xl.w = o.w AND xl.i = o.i - 1
    LEFT JOIN tc_occ ol ON ol.w = o.w AND ol.i = o.i - 2
    LEFT JOIN tc_batch bl ON bl.role = 'm' AND bl.k = ol.k
    LEFT JOIN tc_x xll ON xll.w = o.w AND xll.i = o.i - 2
    LEFT JOIN tc_x xr ON xr.w = o.w AND xr.i = o.i + 2
    LEFT JOIN tc_occ orr ON orr.w = o.w AND orr.i = o.i + 2
    LEFT JOIN tc_batch br ON br.role = 'm' AND br.k = orr.k
),
n AS (
    SELECT w, k, a, b, new_id, wc, st, b_st,
           CASE WHEN lk IS NOT NULL AND lk <= k THEN l_new ELSE l_old END AS l,
           CASE WHEN lk IS NOT NULL AND lk <= k THEN ll_st ELSE l_st END AS l_pos,
           CASE WHEN rk IS NOT NULL AND rk < k THEN r_new ELSE r_old END AS r
    FROM o
)
SELECT k, w, (l::BIGINT << 32) | a AS key, -wc AS d, false AS plus, l_pos AS pos
FROM n WHERE l IS NOT NULL
UNION ALL
SELECT k, w, (l::BIGINT << 32) | new_id, wc, true, l_pos FROM n WHERE l IS NOT NULL
UNION ALL
SELECT k, w, (b::BIGINT << 32) | r, -wc, false, b_st FROM n WHERE r IS NOT NULL
UNION ALL
SELECT k, w, (new_id::BIGINT << 32) | r, wc, true, st FROM n WHERE r IS NOT NULL;

-- name: changes_max_length
-- With max_token_length, pairs too long to ever merge are never counted.
DELETE FROM tc_ch WHERE rowid IN (
    WITH lens AS (
        SELECT id, blen FROM tc_vocab
        UNION ALL
        SELECT new_id, new_blen FROM tc_batch WHERE role = 'm' AND fresh
    )
    SELECT c.rowid FROM tc_ch c
    JOIN lens l ON l.id = (c.key >> 32)
    JOIN lens r ON r.id = (c.key & 4294967295)
    WHERE l.blen + r.blen > $max_token_length::INTEGER
);

-- name: cut
-- How many members ($nm given) stay exact: member k is dropped (with all after it) when, at its
-- turn, a new pair made by an earlier member (at its count when queued, an upper bound) or a
-- deferred candidate (at its count then) comes first in the queue order.
WITH m AS (SELECT k, r, eff, key, eid FROM tc_batch WHERE role = 'm'),
d AS (SELECT r, key, eid, stale, cnt FROM tc_batch WHERE role = 'd'),
dk AS (SELECT key, k, sum(d) AS d FROM tc_ch GROUP BY key, k),
creators AS (SELECT key, max(k) AS creator FROM tc_ch WHERE plus GROUP BY key),
pushed AS (
    SELECT c.creator, c.key, sum(dk.d) AS v
    FROM creators c JOIN dk ON dk.key = c.key AND dk.k <= c.creator
    GROUP BY c.creator, c.key
),
strongest AS (
    SELECT creator,
           max((v::HUGEINT << 64) | (18446744073709551615::HUGEINT - key)) AS strength
    FROM pushed WHERE v > 0
    GROUP BY creator
),
new_pair_cut AS (
    SELECT min(m.k) AS k
    FROM m JOIN strongest s ON s.creator < m.k
    WHERE s.strength > ((m.eff::HUGEINT << 64) | (18446744073709551615::HUGEINT - m.key))
),
deferred_steps AS (
    SELECT m.k, m.eff, m.key AS mkey, m.eid AS meid, d.key, d.eid,
           least(d.stale, d.cnt + coalesce((SELECT sum(dk.d) FROM dk
                                            WHERE dk.key = d.key AND dk.k < m.k), 0)) AS v
    FROM d JOIN m ON m.r > d.r
),
deferred_cut AS (
    SELECT min(k) AS k FROM deferred_steps
    WHERE v > eff OR (v = eff AND (key < mkey OR (key = mkey AND eid < meid)))
)
SELECT least(coalesce((SELECT k FROM new_pair_cut), $nm::INTEGER),
             coalesce((SELECT k FROM deferred_cut), $nm::INTEGER))::INTEGER AS kstar;

-- name: stale_untouched
-- HF pops every entry that comes before a member in the queue; one whose count dropped is
-- re-queued at its current count. (Entries whose pair this pass changed: `stale_touched`.)
-- ($eff, $key, $eid) = the last member kept.
UPDATE tc_items_hot SET stale = cnt
WHERE stale > cnt
  AND (stale > $eff OR (stale = $eff AND (key < $key OR (key = $key AND eid < $eid))))
  AND key NOT IN (SELECT key FROM tc_ch WHERE k < $kstar)
  AND eid NOT IN (SELECT eid FROM tc_batch WHERE role = 'm' AND k < $kstar);

-- name: stale_touched
-- The same for entries whose pair count the members changed: replay the pops member by member
-- (an entry popped at member k is re-queued at its count at that moment).
UPDATE tc_items_hot SET stale = sim.s
FROM (
    WITH m AS (
        SELECT k, eff, key AS mkey, eid AS meid FROM tc_batch WHERE role = 'm' AND k < $kstar
    ),
    dk AS (SELECT key, k, sum(d) AS d FROM tc_ch WHERE k < $kstar GROUP BY key, k),
    t AS (
        SELECT eid, key, stale, cnt FROM tc_items_hot
        WHERE key IN (SELECT key FROM dk) AND eid NOT IN (SELECT meid FROM m)
          AND (stale > $eff OR (stale = $eff AND (key < $key OR (key = $key AND eid < $eid))))
    ),
    steps AS (
        SELECT t.eid, t.key, t.stale, m.k, m.eff, m.mkey, m.meid,
               t.cnt + coalesce(sum(dk.d) OVER (PARTITION BY t.eid ORDER BY m.k
                                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                                0) AS c
        FROM t CROSS JOIN m LEFT JOIN dk ON dk.key = t.key AND dk.k = m.k
    )
    SELECT eid,
           list_reduce(
               list({'eff': eff, 'mkey': mkey, 'meid': meid, 'c': c, 'key': key, 'eid': eid}
                    ORDER BY k),
               lambda acc, x: {'s': CASE WHEN (acc.s > x.eff
                                              OR (acc.s = x.eff AND (x.key < x.mkey
                                                  OR (x.key = x.mkey AND x.eid < x.meid))))
                                             AND acc.s <> x.c
                                        THEN x.c ELSE acc.s END},
               {'s': any_value(stale)}).s AS s
    FROM steps
    GROUP BY eid
) sim
WHERE tc_items_hot.eid = sim.eid;

-- name: apply_seg
UPDATE tc_seg SET syms = n.syms, st = n.st
FROM (
    WITH o AS (SELECT w, i, k FROM tc_occ WHERE k < $kstar),
    y AS (
        SELECT x.w, x.i, x.st, coalesce(b.new_id, x.s) AS s
        FROM tc_x x
        LEFT JOIN o ON o.w = x.w AND o.i = x.i
        LEFT JOIN tc_batch b ON b.role = 'm' AND b.k = o.k
        ANTI JOIN o o2 ON o2.w = x.w AND o2.i = x.i - 1
        WHERE x.w IN (SELECT w FROM o)
    )
    SELECT w, list(s ORDER BY i) AS syms, list(st ORDER BY i) AS st FROM y GROUP BY w
) n
WHERE tc_seg.w = n.w;

-- name: reset_merged
-- lexical-max / first-seen (the seeds' and subword-nmt's semantics): a merged pair's count
-- restarts from 0 (the run rule may still take it below).
INSERT INTO tc_pending SELECT key, -cnt FROM tc_batch WHERE role = 'm' AND k < $kstar;

-- name: apply_counts
CREATE OR REPLACE TEMP TABLE tc_dl AS
SELECT key, sum(d)::BIGINT AS d FROM tc_ch WHERE k < $kstar GROUP BY key HAVING sum(d) <> 0;
INSERT INTO tc_pending SELECT key, d FROM tc_dl;
UPDATE tc_items_hot SET cnt = tc_items_hot.cnt + tc_dl.d
FROM tc_dl WHERE tc_items_hot.key = tc_dl.key;
DELETE FROM tc_items_hot WHERE eid IN (SELECT eid FROM tc_batch WHERE role = 'm' AND k < $kstar);

-- name: new_items
-- HF where_to_update: one new entry per pair with a +change, for the words of those changes,
-- queued with the pair's count right after its creating member (when positive).
CREATE OR REPLACE TEMP TABLE tc_new AS
WITH ch AS (SELECT * FROM tc_ch WHERE k < $kstar),
creators AS (SELECT key, max(k) AS creator FROM ch WHERE plus GROUP BY key),
agg AS (
    SELECT c.key, cr.creator,
           sum(c.d) FILTER (WHERE c.k <= cr.creator) AS v, sum(c.d) AS total,
           list_sort(list(DISTINCT c.w) FILTER (WHERE c.plus)) AS ws,
           min((c.w::BIGINT << 32) | c.pos) FILTER (WHERE c.plus) AS fs
    FROM ch c JOIN creators cr USING (key)
    GROUP BY c.key, cr.creator
)
SELECT ($pass::BIGINT << 32) | (row_number() OVER (ORDER BY creator, key) - 1) AS eid,
       key, v::BIGINT AS stale, total::BIGINT AS cnt, fs, ws
FROM agg
WHERE v > 0;

-- name: new_items_reuse
-- The same when the merged token already existed (a single merge): its pairs may exist already,
-- with counts (tc_pairs + tc_pending, before this pass) the changes add to.
CREATE OR REPLACE TEMP TABLE tc_new AS
WITH ch AS (SELECT * FROM tc_ch WHERE k < $kstar),
creators AS (SELECT key, max(k) AS creator FROM ch WHERE plus GROUP BY key),
base AS (
    SELECT key, sum(cnt) AS cnt
    FROM (SELECT key, cnt FROM tc_pairs UNION ALL SELECT key, d AS cnt FROM tc_pending)
    WHERE key IN (SELECT key FROM creators)
    GROUP BY key
),
agg AS (
    SELECT c.key, cr.creator,
           sum(c.d) FILTER (WHERE c.k <= cr.creator) AS v, sum(c.d) AS total,
           list_sort(list(DISTINCT c.w) FILTER (WHERE c.plus)) AS ws,
           min((c.w::BIGINT << 32) | c.pos) FILTER (WHERE c.plus) AS fs
    FROM ch c JOIN creators cr USING (key)
    GROUP BY c.key, cr.creator
)
SELECT ($pass::BIGINT << 32) | (row_number() OVER (ORDER BY creator, agg.key) - 1) AS eid,
       agg.key, (v + coalesce(base.cnt, 0))::BIGINT AS stale,
       (total + coalesce(base.cnt, 0))::BIGINT AS cnt, fs, ws
FROM agg LEFT JOIN base USING (key)
WHERE v + coalesce(base.cnt, 0) > 0;

-- name: mark_multi
-- id mode: a pair queued again while an older entry may still wait (only after a reused token):
-- never batch it.
INSERT INTO tc_multi SELECT key FROM tc_new;

-- name: fold_old
-- lexical-max / first-seen keep one entry per pair: a re-queued pair takes over the words and
-- first occurrence of its older entry, which is dropped.
CREATE OR REPLACE TEMP TABLE tc_old AS
SELECT key, ws, fs FROM tc_items_hot WHERE key IN (SELECT key FROM tc_new)
UNION ALL
SELECT key, ws, fs FROM tc_items_cold WHERE key IN (SELECT key FROM tc_new);
UPDATE tc_new SET ws = list_sort(list_distinct(list_concat(tc_new.ws, o.ws))),
                  fs = least(tc_new.fs, o.fs)
FROM (SELECT key, flatten(list(ws)) AS ws, min(fs) AS fs FROM tc_old GROUP BY key) o
WHERE tc_new.key = o.key;
DELETE FROM tc_items_hot WHERE key IN (SELECT key FROM tc_old);
DELETE FROM tc_items_cold WHERE key IN (SELECT key FROM tc_old);

-- name: place_new
INSERT INTO tc_items_hot SELECT eid, key, stale, cnt, fs, ws FROM tc_new WHERE stale >= $theta;
INSERT INTO tc_items_cold SELECT eid, key, stale, fs, ws FROM tc_new WHERE stale < $theta;

-- name: log
INSERT INTO tc_merges_log
SELECT $rank0 + b.k, b.a, b.b, b.new_id, b.cnt,
       (SELECT count(DISTINCT o.w) FROM tc_occ o WHERE o.k = b.k)
FROM tc_batch b
WHERE b.role = 'm' AND b.k < $kstar;
INSERT INTO tc_vocab
SELECT new_id, tok, 'merge', new_blen FROM tc_batch WHERE role = 'm' AND k < $kstar AND fresh;
