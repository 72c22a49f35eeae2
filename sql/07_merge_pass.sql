-- Stage 7: one merge pass — merge one pair, or a batch of pairs chosen together, in the words
-- of its queue entry, then update segmentations, counts and queue.
--
-- In:  tc_seg, tc_vocab, tc_items_hot (the best queue entries, stage 8), tc_pairs/tc_pending;
--      the pass's table of pairs, given as parameters (one list per column, see `compute`): the
--      candidates in queue order (r = 0, 1, ...), each with its queue entry (eid, key =
--      a << 32 | b, eff, stale, cnt), its new token (string, length, existing id if any) and
--      whether it shares a symbol the wrong way round with an earlier candidate (conflict).
-- Out: `compute` writes everything the pass changes into tc_pass, one row per change:
--        'seg'   a word's new symbols            'hot'   a queue entry's new counts
--        'new'   a new queue entry               'delta' a pair-count change
--        'log'   a merge (rank order)            'kstar' how many members were kept
--      and the `apply` statements copy them into tc_seg, tc_items_hot / tc_items_cold,
--      tc_pending and tc_merges_log (whose new tokens extend the tc_vocab view).
--
-- Exact semantics: what HuggingFace's BpeTrainer does when it merges the members one after the
-- other (docs/architecture.md, "The BPE loop", "Exact batching"). Member k, after member k - 1:
--   * occurrences: every (a, b) in the words of its queue entry, left to right (`a a a` merges
--     the first two, `a a a a` both pairs);
--   * changes (HF Word::merge), for each occurrence, with L its left neighbour as it stands
--     after members <= k and R its right neighbour after members < k:
--       (L, a) -wc   (L, new) +wc   (b, R) -wc   (new, R) +wc
--     (in `id` mode the merged pair keeps its count, as in HF; the other tie-breaks reset it);
--   * every pair with a +change gets a new queue entry (HF's where_to_update) for those words,
--     queued with its count right after member k (dropped when not positive);
--   * HF pops every entry that comes before member k in the queue; one whose count changed is
--     re-queued at its count at that moment (`stale`).
-- A batch is exact: a candidate whose left symbol is an earlier one's right (or the reverse)
-- is a member only if none of its occurrences overlaps an earlier candidate's (the merges then
-- commute; otherwise it is deferred, not merged), members are numbered k in queue order, and
-- the cut keeps the members that no new pair (at the count it is queued with, an upper bound)
-- and no deferred candidate (at its count then) would overtake.
--
-- Parameters are bound per run ($n candidates read, $prefix the continuing-subword prefix,
-- $theta the hot threshold of stage 8: the engine binds these as DuckDB variables and prepares
-- the statements once) or per pass (the candidate lists, $pass, $vocab_n (the next new id),
-- $hf, $max_token_length of `compute`).

-- name: views
-- tc_vocab: the initial vocabulary and the tokens the merges created.
CREATE OR REPLACE VIEW tc_vocab AS
SELECT id, token, kind, blen FROM tc_vocab_base
UNION ALL
SELECT id, tok, 'merge', blen FROM tc_merges_log WHERE fresh;

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
       named.key IN (SELECT key FROM tc_multi) AS multi, '' AS ltok,
       '' AS rtok
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
       ve.id AS reuse_id, ve.blen AS reuse_blen, false AS multi, toks.ltok,
       toks.rtok
FROM toks LEFT JOIN tc_vocab ve ON ve.token = toks.tok
ORDER BY toks.cnt DESC, toks.ltok DESC, toks.rtok DESC;

-- name: compute
INSERT INTO tc_pass BY NAME
WITH batch AS (
    SELECT unnest($r::INTEGER[]) AS r, unnest($conflict::BOOLEAN[]) AS conflict,
           unnest($eid::HUGEINT[]) AS eid, unnest($key::BIGINT[]) AS key,
           unnest($a::INTEGER[]) AS a, unnest($b::INTEGER[]) AS b,
           unnest($eff::BIGINT[]) AS eff, unnest($stale::BIGINT[]) AS stale,
           unnest($cnt::BIGINT[]) AS cnt, unnest($reuse_id::INTEGER[]) AS reuse_id,
           unnest($new_blen::INTEGER[]) AS new_blen, unnest($tok::VARCHAR[]) AS tok,
           unnest($ltok::VARCHAR[]) AS ltok, unnest($rtok::VARCHAR[]) AS rtok
),
-- the words of each candidate's queue entry, and their symbols
cw AS (SELECT c.r, unnest(h.ws) AS w FROM batch c JOIN tc_items_hot h USING (eid)),
xw AS (SELECT s.w, s.wc, s.syms AS s, s.st FROM tc_seg s WHERE s.w IN (SELECT w FROM cw)),
pos AS (
    SELECT w, unnest(range(1, len(s))) AS j,
           unnest(list_transform(range(1, len(s)), lambda j: (s[j]::BIGINT << 32) | s[j + 1]))
               AS key
    FROM xw
),
hits AS (
    SELECT pos.w, pos.j, c.r, c.a, c.b, c.conflict
    FROM pos JOIN batch c ON c.key = pos.key
    SEMI JOIN cw ON cw.w = pos.w AND cw.r = c.r
),
-- a candidate sharing a symbol with an earlier one is a member only when none of its
-- occurrences overlaps one of an earlier candidate (then they commute); otherwise deferred
overlapped AS (
    SELECT DISTINCT h.r
    FROM hits h JOIN hits h2 ON h2.w = h.w AND h2.r < h.r AND abs(h2.j - h.j) = 1
    WHERE h.conflict
),
m AS (
    SELECT c.*, (row_number() OVER (ORDER BY r) - 1)::INTEGER AS k,
           c.reuse_id IS NULL AS fresh,
           coalesce(c.reuse_id, ($vocab_n::INTEGER
               + sum(CASE WHEN c.reuse_id IS NULL THEN 1 ELSE 0 END) OVER (ORDER BY r) - 1)
               ::INTEGER) AS new_id
    FROM batch c
    WHERE c.r NOT IN (SELECT r FROM overlapped)
),
d AS (SELECT * FROM batch WHERE r IN (SELECT r FROM overlapped)),
-- occurrences (position j of the left symbol) of the members; runs of a == b alternate
occ AS (
    SELECT h.w, h.j::INTEGER AS j, m.k, m.new_id
    FROM hits h JOIN m USING (r) JOIN xw x USING (w)
    WHERE h.a <> h.b
       OR (h.j - 1 - coalesce(list_max(list_filter(range(1, h.j), lambda i: x.s[i] <> h.a)), 0))
          % 2 = 0
),
-- changes: L is new_j when the occurrence two to the left belongs to a member j <= k (merged
-- already), R is new_j when the one two to the right belongs to a member j < k
o AS (
    SELECT o.w, o.j, o.k, o.new_id, x.wc, x.s, len(x.s) AS n,
           ol.k AS lk, ol.new_id AS l_new, orr.k AS rk, orr.new_id AS r_new
    FROM occ o
    JOIN xw x USING (w)
    LEFT JOIN occ ol ON ol.w = o.w AND ol.j = o.j - 2
    LEFT JOIN occ orr ON orr.w = o.w AND orr.j = o.j + 2
),
nb AS (
    SELECT k, w, wc, new_id, s[j] AS a, s[j + 1] AS b,
           CASE WHEN j >= 2 THEN CASE WHEN lk <= k THEN l_new ELSE s[j - 1] END END AS l,
           CASE WHEN j + 2 <= n THEN CASE WHEN rk < k THEN r_new ELSE s[j + 2] END END AS r
    FROM o
),
-- each occurrence changes the pair with its left neighbour x = L, (L, a) -> (L, new), and the
-- one with its right neighbour x = R, (b, R) -> (new, R): one row per side and sign
changes AS (
    SELECT k, w, sign * wc AS d, sign > 0 AS plus,
           CASE WHEN side = 'L' THEN (x::BIGINT << 32) | y ELSE (y::BIGINT << 32) | x END AS key
    FROM (
        SELECT k, w, wc, unnest(['L', 'L', 'R', 'R']) AS side, unnest([-1, 1, -1, 1]) AS sign,
               unnest([l, l, r, r]) AS x, unnest([a, new_id, b, new_id]) AS y
        FROM nb
    )
    WHERE x IS NOT NULL
),
-- with max_token_length, pairs too long to ever merge are never counted
lens AS (
    SELECT id, blen FROM tc_vocab WHERE $max_token_length::BIGINT IS NOT NULL
    UNION ALL
    SELECT new_id, new_blen FROM m WHERE fresh
),
ch AS (
    SELECT * FROM changes WHERE $max_token_length::BIGINT IS NULL
    UNION ALL
    SELECT c.* FROM changes c
    JOIN lens l ON l.id = (c.key >> 32)
    JOIN lens r ON r.id = (c.key & 4294967295)
    WHERE $max_token_length::BIGINT IS NOT NULL
      AND l.blen + r.blen <= $max_token_length::BIGINT
),
-- the cut
dk AS (SELECT key, k, sum(d) AS d FROM ch GROUP BY key, k),
creators AS (SELECT key, max(k) AS creator FROM ch WHERE plus GROUP BY key),
pushed AS (
    SELECT c.creator, c.key, sum(dk.d) AS v
    FROM creators c JOIN dk ON dk.key = c.key AND dk.k <= c.creator
    GROUP BY c.creator, c.key
),
-- queue order as one comparable value (greater = comes first): `id` mode: count, then the
-- smaller pair key; lexical-max: count, then the greater (left, right) strings
toks AS (
    SELECT id, token FROM tc_vocab WHERE NOT $hf::BOOLEAN
    UNION ALL
    SELECT new_id, tok FROM m WHERE NOT $hf::BOOLEAN AND fresh
),
strongest AS (
    SELECT p.creator,
           max(CASE WHEN $hf::BOOLEAN THEN {'v': p.v, 'x': -p.key, 'l': '', 'r': ''}
                    ELSE {'v': p.v, 'x': 0::BIGINT, 'l': tl.token, 'r': tr.token} END) AS strength
    FROM pushed p
    LEFT JOIN toks tl ON tl.id = (p.key >> 32)
    LEFT JOIN toks tr ON tr.id = (p.key & 4294967295)
    WHERE p.v > 0
    GROUP BY p.creator
),
new_pair_cut AS (
    SELECT min(m.k) AS k
    FROM m JOIN strongest s ON s.creator < m.k
    WHERE s.strength > CASE WHEN $hf::BOOLEAN
                            THEN {'v': m.eff, 'x': -m.key, 'l': '', 'r': ''}
                            ELSE {'v': m.eff, 'x': 0::BIGINT, 'l': m.ltok, 'r': m.rtok} END
),
-- a deferred candidate's count at member k's turn (its changes by the members before k)
deferred_steps AS (
    SELECT d.r, m.k, least(any_value(d.stale), any_value(d.cnt) + coalesce(sum(dk.d), 0)) AS v
    FROM d JOIN m ON m.r > d.r
    LEFT JOIN dk ON dk.key = d.key AND dk.k < m.k
    GROUP BY d.r, m.k
),
deferred_cut AS (
    SELECT min(m.k) AS k
    FROM deferred_steps s JOIN d ON d.r = s.r JOIN m ON m.k = s.k
    WHERE CASE WHEN $hf::BOOLEAN
               THEN s.v > m.eff OR (s.v = m.eff AND (d.key < m.key
                    OR (d.key = m.key AND d.eid < m.eid)))
               ELSE {'v': s.v, 'l': d.ltok, 'r': d.rtok} > {'v': m.eff, 'l': m.ltok, 'r': m.rtok}
          END
),
kst AS (
    SELECT least(coalesce((SELECT k FROM new_pair_cut), (SELECT count(*) FROM m)),
                 coalesce((SELECT k FROM deferred_cut), (SELECT count(*) FROM m)))::INTEGER
               AS kstar
),
-- what the members kept (k < kstar) change
mk AS (SELECT m.* FROM m, kst WHERE m.k < kst.kstar),
chk AS (SELECT ch.* FROM ch, kst WHERE ch.k < kst.kstar),
dl AS (
    SELECT key, sum(d)::BIGINT AS d
    FROM (SELECT key, d FROM chk UNION ALL SELECT key, -cnt FROM mk WHERE NOT $hf::BOOLEAN)
    GROUP BY key
    HAVING sum(d) <> 0
),
ko AS (SELECT w, list(j) AS js, list(new_id) AS ids FROM occ, kst WHERE k < kstar GROUP BY w),
seg_rows AS (
    SELECT 'seg' AS kind, x.w,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN list_contains(ko.js, j - 1) THEN -1
                    WHEN list_contains(ko.js, j) THEN ko.ids[list_position(ko.js, j)]
                    ELSE x.s[j] END), lambda v: v >= 0) AS syms,
           list_filter(list_transform(range(1, len(x.s) + 1), lambda j:
               CASE WHEN list_contains(ko.js, j - 1) THEN -1 ELSE x.st[j] END),
               lambda v: v >= 0) AS st
    FROM xw x JOIN ko USING (w)
),
new_rows AS (
    SELECT 'new' AS kind, ($pass::HUGEINT << 64) | c.key AS eid, c.key,
           (sum(c.d) FILTER (WHERE c.k <= cr.creator))::BIGINT AS stale,
           sum(c.d)::BIGINT AS cnt,
           list_sort(list(DISTINCT c.w) FILTER (WHERE c.plus)) AS ws
    FROM chk c JOIN creators cr USING (key)
    GROUP BY c.key, cr.creator
),
-- HF's pops (id mode): entries before the last member kept, whose count changed
lastm AS (SELECT * FROM mk ORDER BY k DESC LIMIT 1),
dkk AS (SELECT key, k, sum(d) AS d FROM chk GROUP BY key, k),
popped AS (
    SELECT h.eid, h.key, h.stale, h.cnt, h.key IN (SELECT key FROM dkk) AS touched
    FROM tc_items_hot h, lastm
    WHERE $hf::BOOLEAN AND h.cnt > -4611686018427387904
      AND h.eid NOT IN (SELECT eid FROM mk)
      AND (h.stale > lastm.eff OR (h.stale = lastm.eff AND (h.key < lastm.key
           OR (h.key = lastm.key AND h.eid < lastm.eid))))
),
-- a touched popped entry's count at member k's turn
steps AS (
    SELECT p.eid, mk.k, any_value(p.cnt) + coalesce(sum(dkk.d), 0) AS c
    FROM popped p CROSS JOIN mk
    LEFT JOIN dkk ON dkk.key = p.key AND dkk.k < mk.k
    WHERE p.touched
    GROUP BY p.eid, mk.k
),
restale AS (
    SELECT eid, cnt AS s FROM popped WHERE NOT touched AND stale > cnt
    UNION ALL
    SELECT st.eid,
           list_reduce(
               list({'eff': mk.eff, 'mkey': mk.key, 'meid': mk.eid, 'c': st.c, 'key': p.key,
                     'eid': p.eid} ORDER BY mk.k),
               lambda acc, x: {'s': CASE WHEN (acc.s > x.eff
                                              OR (acc.s = x.eff AND (x.key < x.mkey
                                                  OR (x.key = x.mkey AND x.eid < x.meid))))
                                             AND acc.s <> x.c
                                        THEN x.c ELSE acc.s END},
               {'s': any_value(p.stale)}).s
    FROM steps st JOIN mk ON mk.k = st.k JOIN popped p ON p.eid = st.eid
    GROUP BY st.eid
),
hot_rows AS (
    SELECT 'hot' AS kind, h.eid, (h.cnt + coalesce(dl.d, 0))::BIGINT AS cnt,
           coalesce(rs.s, h.stale)::BIGINT AS stale
    FROM tc_items_hot h LEFT JOIN dl USING (key) LEFT JOIN restale rs USING (eid)
    WHERE h.cnt > -4611686018427387904
      AND h.eid NOT IN (SELECT eid FROM mk)
      AND (dl.d IS NOT NULL OR rs.s IS NOT NULL)
    UNION ALL
    -- the members' entries are used up (marked dead; stage 8 drops them)
    SELECT 'hot', eid, -4611686018427387904, -4611686018427387904 FROM mk
),
log_rows AS (
    SELECT 'log' AS kind, mk.k, mk.a, mk.b, mk.new_id, mk.cnt, coalesce(t.words, 0) AS words,
           mk.tok, mk.new_blen AS blen, mk.fresh
    FROM mk LEFT JOIN (SELECT k, count(DISTINCT w) AS words FROM occ GROUP BY k) t USING (k)
)
SELECT * FROM seg_rows
UNION ALL BY NAME SELECT * FROM new_rows
UNION ALL BY NAME SELECT * FROM hot_rows
UNION ALL BY NAME SELECT 'delta' AS kind, key, d FROM dl
UNION ALL BY NAME SELECT * FROM log_rows
UNION ALL BY NAME
SELECT 'kstar' AS kind, kstar AS k, (SELECT count(*) FROM mk WHERE fresh) AS d FROM kst;

-- name: apply
UPDATE tc_seg SET syms = p.syms, st = p.st
FROM tc_pass p WHERE p.kind = 'seg' AND tc_seg.w = p.w;
UPDATE tc_items_hot SET cnt = p.cnt, stale = p.stale
FROM tc_pass p WHERE p.kind = 'hot' AND tc_items_hot.eid = p.eid;
INSERT INTO tc_items_hot
SELECT eid, key, stale, cnt, ws FROM tc_pass
WHERE kind = 'new' AND stale > 0 AND stale >= $theta;
INSERT INTO tc_items_cold
SELECT eid, key, stale, ws FROM tc_pass
WHERE kind = 'new' AND stale > 0 AND stale < $theta;
INSERT INTO tc_pending SELECT key, d FROM tc_pass WHERE kind = 'delta';
INSERT INTO tc_merges_log
SELECT (SELECT count(*) FROM tc_merges_log) + k, a, b, new_id, cnt, words, tok, blen, fresh
FROM tc_pass WHERE kind = 'log';
SELECT k, d FROM tc_pass WHERE kind = 'kstar';

-- name: clear
DELETE FROM tc_pass;

-- Passes that merge an existing string (a single member, whose new pairs may exist already)
-- run these between `compute` and `apply`.

-- name: reuse_counts
-- The new entries' pairs keep their counts from before the pass.
UPDATE tc_pass SET stale = tc_pass.stale + b.cnt, cnt = tc_pass.cnt + b.cnt
FROM (
    SELECT key, sum(cnt) AS cnt
    FROM (SELECT key, cnt FROM tc_pairs UNION ALL SELECT key, d AS cnt FROM tc_pending)
    WHERE key IN (SELECT key FROM tc_pass WHERE kind = 'new')
    GROUP BY key
) b
WHERE tc_pass.kind = 'new' AND tc_pass.key = b.key;

-- name: mark_multi
-- id mode: a pair queued again while an older entry may still wait: never batch it.
INSERT INTO tc_multi SELECT key FROM tc_pass WHERE kind = 'new' AND stale > 0;

-- name: fold_old
-- lexical-max keeps one entry per pair: a re-queued pair takes over the words of its older
-- entry, which is dropped.
UPDATE tc_pass SET ws = list_sort(list_distinct(list_concat(tc_pass.ws, o.ws)))
FROM (
    SELECT key, flatten(list(ws)) AS ws
    FROM (SELECT key, ws FROM tc_items_hot WHERE cnt > -4611686018427387904
          UNION ALL SELECT key, ws FROM tc_items_cold)
    WHERE key IN (SELECT key FROM tc_pass WHERE kind = 'new' AND stale > 0)
    GROUP BY key
) o
WHERE tc_pass.kind = 'new' AND tc_pass.stale > 0 AND tc_pass.key = o.key;
DELETE FROM tc_items_hot
WHERE key IN (SELECT key FROM tc_pass WHERE kind = 'new' AND stale > 0);
DELETE FROM tc_items_cold
WHERE key IN (SELECT key FROM tc_pass WHERE kind = 'new' AND stale > 0);
