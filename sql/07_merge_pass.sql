-- Stage 7: one merge pass — merge one pair, or a batch of pairs chosen together, in the words
-- its queue entry was created for, and update segmentations, counts and queue.
--
-- In:  tc_seg, tc_vocab, tc_items_hot (the best queue entries), tc_pending / tc_pairs (counts);
--      tc_batch, the pass's table of pairs (filled by the `batch` section): one row per member
--      (role 'm', k = 0, 1, ... in merge order) or deferred candidate (role 'd', k = -1), with
--      its queue entry (eid, key = a << 32 | b, eff, stale, cnt), its place r in queue order and
--      the id / length of the new token (an existing id when the merged string exists).
-- Out: tc_seg rewritten for the words touched; tc_merges_log and tc_vocab appended; counts
--      changed in tc_pending and tc_items_hot; the members' entries removed; new entries queued
--      (tc_items_hot / tc_items_cold) — what HuggingFace's BpeTrainer does when it merges the
--      members one after the other (DESIGN.md §3-4).
--
-- Exact semantics, member k after member k - 1:
--   * occurrences: every (a, b) in the words of its queue entry, left to right (`a a a` merges
--     the first two, `a a a a` both pairs);
--   * changes (HF Word::merge), for each occurrence with L its left neighbour as it stands after
--     members <= k and R its right neighbour after members < k:
--       (L, a) -wc   (L, new) +wc   (b, R) -wc   (new, R) +wc
--     (the merged pair itself keeps its count in `id` mode, as in HF);
--   * every pair with a +change gets a new queue entry (HF's where_to_update) for those words,
--     queued with its count right after member k, when positive.
-- A batch is exact: no member's left symbol is an earlier member's right or the reverse (those
-- candidates are deferred), and `cut` keeps the members that no new pair (at the count it is
-- queued with, an upper bound) and no deferred candidate (at its count then) overtakes.
--
-- Parameters ($name) are bound once per run (the engine binds them as DuckDB variables, so the
-- statements below are prepared once): $n candidates read per pass, $prefix the continuing
-- subword prefix, $theta the hot/cold threshold of stage 8. Per-pass values live in tables:
-- tc_batch, and tc_state(kstar = members kept, pass = pass number, for new entry ids).

-- name: views
-- tc_ch: the pair-count changes of every occurrence in tc_occ (one row each: the member k
-- that makes it, the word, the pair key, the change d, plus = a +change, pos = start of the
-- pair's left symbol). L is new_j when the occurrence two to the left belongs to a member
-- j <= k (already merged), R new_j when the one two to the right belongs to a member j < k. tc_new_raw / tc_new: the new queue entries of the members kept (k < kstar);
-- an entry id is pass << 64 | key (HUGEINT): unique, and for one pair in creation order.
CREATE OR REPLACE VIEW tc_ch_all AS
WITH o AS (
    SELECT o.w, o.j, o.k, o.new_id, x.wc, x.s, x.st, len(x.s) AS n,
           ol.k AS lk, ol.new_id AS l_new, orr.k AS rk, orr.new_id AS r_new
    FROM tc_occ o
    JOIN tc_xw x USING (w)
    LEFT JOIN tc_occ ol ON ol.w = o.w AND ol.j = o.j - 2
    LEFT JOIN tc_occ orr ON orr.w = o.w AND orr.j = o.j + 2
),
n AS (
    SELECT k, w, wc, new_id, s[j] AS a, s[j + 1] AS b, st[j] AS a_st, st[j + 1] AS b_st,
           CASE WHEN j >= 2 THEN CASE WHEN lk <= k THEN l_new ELSE s[j - 1] END END AS l,
           CASE WHEN lk <= k THEN st[j - 2] ELSE st[j - 1] END AS l_pos,
           CASE WHEN j + 2 <= n THEN CASE WHEN rk < k THEN r_new ELSE s[j + 2] END END AS r
    FROM o
)
SELECT k, w, (l::BIGINT << 32) | a AS key, -wc AS d, false AS plus, l_pos AS pos
FROM n WHERE l IS NOT NULL
UNION ALL
SELECT k, w, (l::BIGINT << 32) | new_id, wc, true, l_pos FROM n WHERE l IS NOT NULL
UNION ALL
SELECT k, w, (b::BIGINT << 32) | r, -wc, false, b_st FROM n WHERE r IS NOT NULL
UNION ALL
SELECT k, w, (new_id::BIGINT << 32) | r, wc, true, a_st FROM n WHERE r IS NOT NULL;
CREATE OR REPLACE VIEW tc_ch_eligible AS SELECT * FROM tc_ch_all;
CREATE OR REPLACE VIEW tc_ch AS SELECT * FROM tc_ch_t;
CREATE OR REPLACE VIEW tc_new_raw AS
WITH ch AS (SELECT * FROM tc_ch WHERE k < (SELECT kstar FROM tc_state)),
creators AS (SELECT key, max(k) AS creator FROM ch WHERE plus GROUP BY key)
SELECT ((SELECT pass FROM tc_state)::HUGEINT << 64) | c.key AS eid, c.key,
       (sum(c.d) FILTER (WHERE c.k <= cr.creator))::BIGINT AS stale, sum(c.d)::BIGINT AS cnt,
       min((c.w::BIGINT << 32) | c.pos) FILTER (WHERE c.plus) AS fs,
       list_sort(list(DISTINCT c.w) FILTER (WHERE c.plus)) AS ws
FROM ch c JOIN creators cr USING (key)
GROUP BY c.key, cr.creator;
CREATE OR REPLACE VIEW tc_new AS SELECT * FROM tc_new_raw WHERE stale > 0;

-- name: views_max_length
-- With max_token_length, pairs too long to ever merge are never counted.
CREATE OR REPLACE VIEW tc_ch_eligible AS
WITH lens AS (
    SELECT id, blen FROM tc_vocab
    UNION ALL
    SELECT new_id, new_blen FROM tc_batch WHERE role = 'm' AND fresh
)
SELECT c.* FROM tc_ch_all c
JOIN lens l ON l.id = (c.key >> 32)
JOIN lens r ON r.id = (c.key & 4294967295)
WHERE l.blen + r.blen <= $max_token_length;

-- name: candidates_id
-- The best queue entries in HF order: effective count least(queued, current) descending (an
-- entry whose count rose after it was queued still pops at its queued count), then the smallest
-- pair (left id, right id), then the oldest entry.
WITH top AS (
    SELECT eid, key, stale, cnt, least(stale, cnt) AS eff
    FROM tc_items_hot
    ORDER BY eff DESC, key, eid
    LIMIT $n
),
named AS (
    SELECT top.*, (key >> 32)::INTEGER AS a, (key & 4294967295)::INTEGER AS b,
           vl.token || CASE WHEN coalesce($prefix, '') <> '' AND starts_with(vr.token, $prefix)
                            THEN substr(vr.token, length($prefix) + 1)
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
    SELECT top.*, ltok || CASE WHEN coalesce($prefix, '') <> '' AND starts_with(rtok, $prefix)
                               THEN substr(rtok, length($prefix) + 1)
                               ELSE rtok END AS tok
    FROM top
)
SELECT toks.eid, toks.key, toks.a, toks.b, toks.stale, toks.cnt, toks.eff, toks.tok, toks.blen,
       ve.id AS reuse_id, ve.blen AS reuse_blen, false AS multi, NULL::BIGINT AS fs
FROM toks LEFT JOIN tc_vocab ve ON ve.token = toks.tok
ORDER BY toks.cnt DESC, toks.ltok DESC, toks.rtok DESC;

-- name: candidates_first_seen
-- The seeds' order: highest count, then the pair whose first occurrence comes first. fs is a
-- lower bound of the first occurrence; the engine checks the leaders with `first_seen_actual`.
WITH top AS (
    SELECT eid, key, stale, cnt, cnt AS eff, fs FROM tc_items_hot
    WHERE cnt > 0
    ORDER BY cnt DESC, fs, eid
    LIMIT $n
),
named AS (
    SELECT top.*, (key >> 32)::INTEGER AS a, (key & 4294967295)::INTEGER AS b,
           vl.token || CASE WHEN coalesce($prefix, '') <> '' AND starts_with(vr.token, $prefix)
                            THEN substr(vr.token, length($prefix) + 1)
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
    WHERE h.eid IN (SELECT unnest($eids::HUGEINT[]))
),
firsts AS (
    SELECT e.eid, e.w, s.st[list_filter(range(1, len(s.syms)), lambda j:
               s.syms[j] = e.a AND s.syms[j + 1] = e.b)[1]] AS st
    FROM e JOIN tc_seg s USING (w)
)
SELECT eid, min((w::BIGINT << 32) | st) AS fs FROM firsts WHERE st IS NOT NULL GROUP BY eid;
UPDATE tc_items_hot SET fs = f.fs FROM tc_fs f WHERE tc_items_hot.eid = f.eid;
SELECT eid, fs FROM tc_fs;

-- name: batch
INSERT INTO tc_batch
SELECT unnest($k::INTEGER[]), unnest($role::VARCHAR[]), unnest($r::INTEGER[]),
       unnest($eid::HUGEINT[]), unnest($key::BIGINT[]), unnest($a::INTEGER[]),
       unnest($b::INTEGER[]), unnest($eff::BIGINT[]), unnest($stale::BIGINT[]),
       unnest($cnt::BIGINT[]), unnest($new_id::INTEGER[]), unnest($new_blen::INTEGER[]),
       unnest($tok::VARCHAR[]), unnest($fresh::BOOLEAN[]);

-- name: occurrences
-- The members' words (tc_xw: symbols s, starts st) and where each member merges (tc_occ: word w,
-- position j of the left symbol, member k, new token id). A member merges only in the words of
-- its queue entry; in a run of a == b it takes every other position, left to right.
INSERT INTO tc_xw
SELECT s.w, s.wc, s.syms, s.st FROM tc_seg s
WHERE s.w IN (SELECT unnest(h.ws) FROM tc_batch b JOIN tc_items_hot h USING (eid)
              WHERE b.role = 'm');
INSERT INTO tc_occ
WITH mw AS (
    SELECT b.k, unnest(h.ws) AS w
    FROM tc_batch b JOIN tc_items_hot h USING (eid)
    WHERE b.role = 'm'
),
pos AS (
    SELECT w, unnest(range(1, len(s))) AS j,
           unnest(list_transform(range(1, len(s)), lambda j: (s[j]::BIGINT << 32) | s[j + 1]))
               AS key
    FROM tc_xw
),
hits AS (
    SELECT pos.w, pos.j, b.k, b.a, b.b, b.new_id
    FROM pos
    JOIN tc_batch b ON b.role = 'm' AND b.key = pos.key
    SEMI JOIN mw ON mw.w = pos.w AND mw.k = b.k
)
SELECT h.w, h.j::INTEGER, h.k, h.new_id
FROM hits h JOIN tc_xw x USING (w)
WHERE h.a <> h.b
   OR (h.j - 1 - coalesce(list_max(list_filter(range(1, h.j), lambda i: x.s[i] <> h.a)), 0))
      % 2 = 0;

-- name: changes
-- The changes materialised (as tc_ch) for the statements below.
INSERT INTO tc_ch_t SELECT * FROM tc_ch_eligible;

-- name: cut
-- How many members stay exact. Member k (and all after it) is dropped when, at its turn, a new
-- pair queued by an earlier member or a deferred candidate comes first in the queue order.
-- Also counts the pass.
UPDATE tc_state SET pass = pass + 1, kstar = (
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
    SELECT least(coalesce((SELECT k FROM new_pair_cut), (SELECT count(*) FROM m)),
                 coalesce((SELECT k FROM deferred_cut), (SELECT count(*) FROM m)))::INTEGER
);

-- name: stale
-- id mode: HF pops every entry that comes before a member in the queue; one whose count
-- changed is re-queued at its count at that moment. An entry untouched by the pass gets its
-- current count; one whose pair the members changed replays the pops member by member.
UPDATE tc_items_hot SET stale = u.s
FROM (
    WITH m AS (
        SELECT k, eff, key AS mkey, eid AS meid FROM tc_batch
        WHERE role = 'm' AND k < (SELECT kstar FROM tc_state)
    ),
    lastm AS (SELECT * FROM m ORDER BY k DESC LIMIT 1),
    dk AS (
        SELECT key, k, sum(d) AS d FROM tc_ch WHERE k < (SELECT kstar FROM tc_state)
        GROUP BY key, k
    ),
    popped AS (
        SELECT h.eid, h.key, h.stale, h.cnt, h.key IN (SELECT key FROM dk) AS touched
        FROM tc_items_hot h, lastm
        WHERE h.eid NOT IN (SELECT meid FROM m)
          AND (h.stale > lastm.eff OR (h.stale = lastm.eff AND (h.key < lastm.mkey
               OR (h.key = lastm.mkey AND h.eid < lastm.meid))))
    ),
    steps AS (
        SELECT p.eid, p.key, p.stale, m.k, m.eff, m.mkey, m.meid,
               p.cnt + coalesce((SELECT sum(dk.d) FROM dk WHERE dk.key = p.key AND dk.k < m.k),
                                0) AS c
        FROM popped p CROSS JOIN m
        WHERE p.touched
    )
    SELECT eid, cnt AS s FROM popped WHERE NOT touched AND stale > cnt
    UNION ALL
    SELECT eid,
           list_reduce(
               list({'eff': eff, 'mkey': mkey, 'meid': meid, 'c': c, 'key': key, 'eid': eid}
                    ORDER BY k),
               lambda acc, x: {'s': CASE WHEN (acc.s > x.eff
                                              OR (acc.s = x.eff AND (x.key < x.mkey
                                                  OR (x.key = x.mkey AND x.eid < x.meid))))
                                             AND acc.s <> x.c
                                        THEN x.c ELSE acc.s END},
               {'s': any_value(stale)}).s
    FROM steps
    GROUP BY eid
) u
WHERE tc_items_hot.eid = u.eid AND tc_items_hot.stale <> u.s;

-- name: apply_seg
UPDATE tc_seg SET syms = n.syms, st = n.st
FROM (
    WITH ko AS (
        SELECT w, list(j) AS js, list(new_id) AS ids FROM tc_occ
        WHERE k < (SELECT kstar FROM tc_state)
        GROUP BY w
    )
    SELECT x.w,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN list_contains(ko.js, j - 1) THEN -1
                    WHEN list_contains(ko.js, j) THEN ko.ids[list_position(ko.js, j)]
                    ELSE x.s[j] END), lambda v: v >= 0) AS syms,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN list_contains(ko.js, j - 1) THEN -1 ELSE x.st[j] END),
               lambda v: v >= 0) AS st
    FROM tc_xw x JOIN ko USING (w)
) n
WHERE tc_seg.w = n.w;

-- name: reset_merged
-- lexical-max / first-seen (the seeds' and subword-nmt's semantics): a merged pair's count
-- restarts from 0 (the run rule may still take it below).
INSERT INTO tc_pending
SELECT key, -cnt FROM tc_batch WHERE role = 'm' AND k < (SELECT kstar FROM tc_state);

-- name: apply_counts
UPDATE tc_items_hot SET cnt = tc_items_hot.cnt + dl.d
FROM (
    SELECT key, sum(d) AS d FROM tc_ch WHERE k < (SELECT kstar FROM tc_state)
    GROUP BY key HAVING sum(d) <> 0
) dl
WHERE tc_items_hot.key = dl.key;
INSERT INTO tc_pending
SELECT key, sum(d) FROM tc_ch WHERE k < (SELECT kstar FROM tc_state)
GROUP BY key HAVING sum(d) <> 0;
DELETE FROM tc_items_hot
WHERE eid IN (SELECT eid FROM tc_batch WHERE role = 'm' AND k < (SELECT kstar FROM tc_state));

-- name: place_new
INSERT INTO tc_items_hot SELECT eid, key, stale, cnt, fs, ws FROM tc_new WHERE stale >= $theta;
INSERT INTO tc_items_cold SELECT eid, key, stale, fs, ws FROM tc_new WHERE stale < $theta;

-- name: log
INSERT INTO tc_merges_log
WITH touched AS (SELECT k, count(DISTINCT w) AS words FROM tc_occ GROUP BY k)
SELECT (SELECT count(*) FROM tc_merges_log) + b.k, b.a, b.b, b.new_id, b.cnt,
       coalesce(t.words, 0)
FROM tc_batch b LEFT JOIN touched t USING (k)
WHERE b.role = 'm' AND b.k < (SELECT kstar FROM tc_state);
INSERT INTO tc_vocab
SELECT new_id, tok, 'merge', new_blen FROM tc_batch
WHERE role = 'm' AND k < (SELECT kstar FROM tc_state) AND fresh;

-- name: clear
DELETE FROM tc_xw;
DELETE FROM tc_occ;
DELETE FROM tc_ch_t;
DELETE FROM tc_batch;

-- name: kstar
SELECT kstar FROM tc_state;

-- Passes that merge an existing string (one member; the new token's pairs may exist already)
-- materialise their new entries, since counts from before the pass are added to them.

-- name: new_reuse
INSERT INTO tc_new_reuse
WITH base AS (
    SELECT key, sum(cnt) AS cnt
    FROM (SELECT key, cnt FROM tc_pairs UNION ALL SELECT key, d AS cnt FROM tc_pending)
    WHERE key IN (SELECT key FROM tc_new_raw)
    GROUP BY key
)
SELECT n.eid, n.key, n.stale + coalesce(base.cnt, 0), n.cnt + coalesce(base.cnt, 0), n.fs, n.ws
FROM tc_new_raw n LEFT JOIN base USING (key)
WHERE n.stale + coalesce(base.cnt, 0) > 0;

-- name: mark_multi
-- id mode: a pair queued again while an older entry may still wait: never batch it.
INSERT INTO tc_multi SELECT key FROM tc_new_reuse;

-- name: fold_old
-- lexical-max / first-seen keep one entry per pair: a re-queued pair takes over the words and
-- the first occurrence of its older entry, which is dropped.
UPDATE tc_new_reuse SET ws = list_sort(list_distinct(list_concat(tc_new_reuse.ws, o.ws))),
                        fs = least(tc_new_reuse.fs, o.fs)
FROM (
    SELECT key, flatten(list(ws)) AS ws, min(fs) AS fs
    FROM (SELECT key, ws, fs FROM tc_items_hot UNION ALL SELECT key, ws, fs FROM tc_items_cold)
    WHERE key IN (SELECT key FROM tc_new_reuse)
    GROUP BY key
) o
WHERE tc_new_reuse.key = o.key;
DELETE FROM tc_items_hot WHERE key IN (SELECT key FROM tc_new_reuse);
DELETE FROM tc_items_cold WHERE key IN (SELECT key FROM tc_new_reuse);

-- name: place_reuse
INSERT INTO tc_items_hot
SELECT eid, key, stale, cnt, fs, ws FROM tc_new_reuse WHERE stale >= $theta;
INSERT INTO tc_items_cold SELECT eid, key, stale, fs, ws FROM tc_new_reuse WHERE stale < $theta;
DELETE FROM tc_new_reuse;
