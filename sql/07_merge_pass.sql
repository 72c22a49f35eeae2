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
-- tc_ch: the pair-count changes of every occurrence in tc_x (one row each: the member k that
-- makes it, the word, the pair key, the change d, plus = a +change, pos = start of the pair's
-- left symbol). tc_new_raw / tc_new: the new queue entries of the members kept (k < kstar);
-- an entry id is pass << 64 | key (HUGEINT): unique, and for one pair in creation order.
CREATE OR REPLACE MACRO tc_left_changed(kp, j) AS
    j >= 3 AND kp[j - 2] IS NOT NULL AND kp[j - 2] <= kp[j];
CREATE OR REPLACE MACRO tc_right_changed(kp, j) AS
    j + 2 <= len(kp) AND kp[j + 2] IS NOT NULL AND kp[j + 2] < kp[j];
CREATE OR REPLACE VIEW tc_ch_all AS
WITH b AS (SELECT list(new_id ORDER BY k) AS bnew FROM tc_batch WHERE role = 'm'),
c AS (
    SELECT x.w, unnest(flatten(list_transform(range(1, len(x.s)), lambda j:
        CASE WHEN x.kp[j] IS NULL THEN []
        ELSE [
            -- (L, a) -wc and (L, new) +wc, L = the left neighbour after members <= k
            CASE WHEN j >= 2 THEN {'k': x.kp[j], 'key': (CASE WHEN tc_left_changed(x.kp, j)
                    THEN b.bnew[x.kp[j - 2] + 1] ELSE x.s[j - 1] END)::BIGINT << 32 | x.s[j],
                'd': -x.wc, 'plus': false, 'pos': CASE WHEN tc_left_changed(x.kp, j)
                    THEN x.st[j - 2] ELSE x.st[j - 1] END} END,
            CASE WHEN j >= 2 THEN {'k': x.kp[j], 'key': (CASE WHEN tc_left_changed(x.kp, j)
                    THEN b.bnew[x.kp[j - 2] + 1] ELSE x.s[j - 1] END)::BIGINT << 32
                    | b.bnew[x.kp[j] + 1],
                'd': x.wc, 'plus': true, 'pos': CASE WHEN tc_left_changed(x.kp, j)
                    THEN x.st[j - 2] ELSE x.st[j - 1] END} END,
            -- (b, R) -wc and (new, R) +wc, R = the right neighbour after members < k
            CASE WHEN j + 2 <= len(x.s) THEN {'k': x.kp[j], 'key': x.s[j + 1]::BIGINT << 32
                    | (CASE WHEN tc_right_changed(x.kp, j)
                       THEN b.bnew[x.kp[j + 2] + 1] ELSE x.s[j + 2] END),
                'd': -x.wc, 'plus': false, 'pos': x.st[j + 1]} END,
            CASE WHEN j + 2 <= len(x.s) THEN {'k': x.kp[j], 'key': b.bnew[x.kp[j] + 1]::BIGINT
                    << 32 | (CASE WHEN tc_right_changed(x.kp, j)
                             THEN b.bnew[x.kp[j + 2] + 1] ELSE x.s[j + 2] END),
                'd': x.wc, 'plus': true, 'pos': x.st[j]} END
        ] END))) AS ch
    FROM tc_x x, b
)
SELECT ch.k::INTEGER AS k, w, ch.key::BIGINT AS key, ch.d::BIGINT AS d, ch.plus AS plus,
       ch.pos::INTEGER AS pos
FROM c
WHERE ch IS NOT NULL;
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
-- The members' words, one row each: symbols s, starts st, and kp[j] = the member that merges
-- (s[j], s[j + 1]) there, NULL elsewhere. A member merges only in the words of its queue entry;
-- in a run of a == b it takes every other position, left to right.
INSERT INTO tc_x
WITH b AS (SELECT list(key ORDER BY k) AS bkeys FROM tc_batch WHERE role = 'm'),
mw AS (
    SELECT bt.k, unnest(h.ws) AS w
    FROM tc_batch bt JOIN tc_items_hot h USING (eid)
    WHERE bt.role = 'm'
),
allowed AS (SELECT w, list(k) AS ks FROM mw GROUP BY w),
hits AS (
    SELECT s.w, s.wc, s.syms, s.st,
           list_transform(range(1, len(s.syms)), lambda j:
               CASE WHEN list_contains(al.ks, list_position(b.bkeys,
                             (s.syms[j]::BIGINT << 32) | s.syms[j + 1]) - 1)
                    THEN list_position(b.bkeys, (s.syms[j]::BIGINT << 32) | s.syms[j + 1]) - 1
               END) AS h
    FROM tc_seg s JOIN allowed al USING (w), b
)
SELECT w, wc, syms, st,
       list_transform(range(1, len(syms)), lambda j:
           CASE WHEN h[j] IS NOT NULL
                     AND (j = 1 OR h[j - 1] IS DISTINCT FROM h[j]
                          OR (j - list_max(list_filter(range(1, j + 1), lambda i:
                                  i = 1 OR h[i - 1] IS DISTINCT FROM h[i]))) % 2 = 0)
                THEN h[j] END)::INTEGER[] AS kp
FROM hits;

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
    WITH b AS (SELECT list(new_id ORDER BY k) AS bnew FROM tc_batch WHERE role = 'm'),
    ks AS (SELECT kstar FROM tc_state)
    SELECT x.w,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN j >= 2 AND x.kp[j - 1] < ks.kstar THEN -1
                    WHEN x.kp[j] < ks.kstar THEN b.bnew[x.kp[j] + 1]
                    ELSE x.s[j] END), lambda v: v >= 0) AS syms,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN j >= 2 AND x.kp[j - 1] < ks.kstar THEN -1 ELSE x.st[j] END),
               lambda v: v >= 0) AS st
    FROM tc_x x, b, ks
    WHERE list_min(x.kp) < ks.kstar
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
WITH touched AS (
    SELECT k, count(*) AS words
    FROM (SELECT unnest(list_distinct(list_filter(kp, lambda v: v IS NOT NULL))) AS k FROM tc_x)
    GROUP BY k
)
SELECT (SELECT count(*) FROM tc_merges_log) + b.k, b.a, b.b, b.new_id, b.cnt,
       coalesce(t.words, 0)
FROM tc_batch b LEFT JOIN touched t USING (k)
WHERE b.role = 'm' AND b.k < (SELECT kstar FROM tc_state);
INSERT INTO tc_vocab
SELECT new_id, tok, 'merge', new_blen FROM tc_batch
WHERE role = 'm' AND k < (SELECT kstar FROM tc_state) AND fresh;

-- name: clear
DELETE FROM tc_x;
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
