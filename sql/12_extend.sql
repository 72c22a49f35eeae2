-- Stage 12: extending a base tokenizer (`--extend BASE`, docs/extend.md) — the loop's state
-- "after the base's merges", from which the merge loop of stages 6-8 (or the chain of stages
-- 10-11) goes on.
--
-- In:  tc_base_vocab_in(id, token, kind, blen) and tc_base_merges_in(rank, left_id, right_id,
--      id): the base's vocabulary (blen its length without prefix/suffix, as the loop counts
--      it) and its merges in rank order, registered by the engine; tc_vocab and tc_seg from
--      stages 4-5.
-- Out: `base`: tc_base_vocab, tc_base_merges (temporary: a checkpoint does not save them) and
--      tc_base_pairs(key, rank, id), the merge table as the encoder reads it (a pair listed
--      twice: its last rank, as HF's merge map);
--      `same_initial`: whether stages 4-5 made the base's first ids (the *replay*: the loop
--      runs from there, each merge checked against the base's by `diverged_*`);
--      otherwise the *rebuild*: stages 4-5 are run with the corpus's own characters, then
--      `own_ids` gives tc_vocab the base's vocabulary plus the corpus's characters (and
--      variants) the base lacks, with ids after the base's largest in their stage-4-5 order,
--      and tc_seg those ids; `segment_*` apply the base's merges to every word as the encoder
--      does (`BPEModel.apply_merges`): per round, each word merges its lowest-rank pair —
--      every occurrence, leftmost first (a run `a a a` of (a, a): every other one), when the
--      table is well formed (`well_formed`: each merge ranks after every merge making its
--      parts, as a trained table), else the leftmost one — until no word holds a pair of the
--      table; tc_base_joined(rank, count, words) is what each base merge joined (weighted
--      occurrences, distinct words); `log_bpe` / `log_wordpiece` put the base's merges first in
--      the merges log (ranks 0..K-1; their tokens exist already, so they make none).

-- name: base
CREATE OR REPLACE TEMP TABLE tc_base_vocab AS
SELECT id::INTEGER AS id, token, kind, blen::INTEGER AS blen FROM tc_base_vocab_in;
CREATE OR REPLACE TEMP TABLE tc_base_merges AS
SELECT rank::INTEGER AS rank, left_id::INTEGER AS left_id, right_id::INTEGER AS right_id,
       id::INTEGER AS id, (left_id::BIGINT << 32) | right_id::BIGINT AS key
FROM tc_base_merges_in;
CREATE OR REPLACE TEMP TABLE tc_base_pairs AS
SELECT key, max(rank) AS rank, arg_max(id, rank) AS id FROM tc_base_merges GROUP BY key;

-- name: same_initial
SELECT count(*) = 0
FROM tc_vocab v LEFT JOIN tc_base_vocab b USING (id)
WHERE b.token IS DISTINCT FROM v.token OR b.kind IS DISTINCT FROM v.kind;

-- name: own_ids
CREATE OR REPLACE TABLE tc_ext_vocab AS
SELECT id, token, kind, blen FROM tc_base_vocab
UNION ALL
SELECT ((SELECT count(*) FROM tc_base_vocab) + row_number() OVER (ORDER BY id) - 1)::INTEGER,
       token, kind, blen
FROM tc_vocab
WHERE token NOT IN (SELECT token FROM tc_base_vocab);
CREATE OR REPLACE TABLE tc_ext_seg AS
WITH lut AS (
    SELECT list(e.id ORDER BY v.id) AS ids
    FROM tc_vocab v JOIN tc_ext_vocab e USING (token)
)
SELECT s.w, s.wc, list_transform(s.syms, lambda x: lut.ids[x + 1]) AS syms, s.st
FROM tc_seg s, lut
ORDER BY s.w;
DROP TABLE tc_vocab;
DROP TABLE tc_seg;
ALTER TABLE tc_ext_vocab RENAME TO tc_vocab;
ALTER TABLE tc_ext_seg RENAME TO tc_seg;

-- name: well_formed
WITH made AS (SELECT id, max(rank) AS rank FROM tc_base_pairs GROUP BY id)
SELECT coalesce(bool_and(p.rank > coalesce(ml.rank, -1) AND p.rank > coalesce(mr.rank, -1)),
                true)
FROM tc_base_pairs p
LEFT JOIN made ml ON ml.id = (p.key >> 32)
LEFT JOIN made mr ON mr.id = (p.key & 4294967295);

-- name: segment_start
-- the words that may still merge (two symbols or more), and what each round joined
CREATE OR REPLACE TEMP TABLE tc_ext_active AS
SELECT w, wc, syms, st FROM tc_seg WHERE len(syms) >= 2;
CREATE OR REPLACE TEMP TABLE tc_ext_trace (rank INTEGER, w INTEGER, n BIGINT);

-- name: segment_round
-- One round ($every: every occurrence of each word's lowest-rank pair, else the leftmost
-- one); the words merged stay active with their new symbols, the others are done.
CREATE OR REPLACE TEMP TABLE tc_ext_round AS
WITH pos AS (
    SELECT w, unnest(range(1, len(syms))) AS j,
           unnest(list_transform(range(1, len(syms)),
                                 lambda j: (syms[j]::BIGINT << 32) | syms[j + 1])) AS key
    FROM tc_ext_active
),
ranked AS (SELECT p.w, p.j, b.rank, b.id FROM pos p JOIN tc_base_pairs b USING (key)),
best AS (  -- each word's lowest-rank pair: its occurrences, o = 1, 2, ... left to right
    SELECT *, row_number() OVER (PARTITION BY w ORDER BY j) AS o
    FROM (SELECT *, min(rank) OVER (PARTITION BY w) AS lowest FROM ranked)
    WHERE rank = lowest
),
-- consecutive occurrences (a pair (a, a) in a run a a a) overlap: the leftmost of each chain
-- merges first, so every other one
chained AS (
    SELECT *, coalesce(lag(j) OVER (PARTITION BY w ORDER BY j) = j - 1, false) AS chained
    FROM best
    WHERE $every::BOOLEAN OR o = 1
),
kept AS (
    SELECT * FROM (
        SELECT *, max(CASE WHEN NOT chained THEN o END)
                      OVER (PARTITION BY w ORDER BY j ROWS UNBOUNDED PRECEDING) AS chain_start
        FROM chained)
    WHERE (o - chain_start) % 2 = 0
),
ko AS (SELECT w, any_value(rank) AS rank, any_value(id) AS id, list(j) AS js FROM kept
       GROUP BY w)
SELECT a.w, a.wc, ko.rank, len(ko.js) AS n,
       list_filter(list_transform(range(1, len(a.syms) + 1), lambda j:
           CASE WHEN list_contains(ko.js, j - 1) THEN -1
                WHEN list_contains(ko.js, j) THEN ko.id
                ELSE a.syms[j] END), lambda v: v >= 0) AS syms,
       list_filter(list_transform(range(1, len(a.syms) + 1), lambda j:
           CASE WHEN list_contains(ko.js, j - 1) THEN -1 ELSE a.st[j] END),
           lambda v: v >= 0) AS st
FROM tc_ext_active a JOIN ko USING (w);
INSERT INTO tc_ext_trace SELECT rank, w, n FROM tc_ext_round;
UPDATE tc_seg SET syms = r.syms, st = r.st FROM tc_ext_round r WHERE tc_seg.w = r.w;
CREATE OR REPLACE TEMP TABLE tc_ext_active AS
SELECT w, wc, syms, st FROM tc_ext_round WHERE len(syms) >= 2;
SELECT count(*) FROM tc_ext_round;

-- name: segment_end
CREATE OR REPLACE TEMP TABLE tc_base_joined AS
SELECT m.rank, coalesce(t.count, 0)::BIGINT AS count, coalesce(t.words, 0)::BIGINT AS words
FROM tc_base_merges m
LEFT JOIN (
    SELECT t.rank, sum(t.n * s.wc) AS count, count(DISTINCT t.w) AS words
    FROM tc_ext_trace t JOIN tc_seg s USING (w)
    GROUP BY t.rank
) t USING (rank);
DROP TABLE tc_ext_trace;
DROP TABLE tc_ext_active;
DROP TABLE IF EXISTS tc_ext_round;

-- name: log_bpe
-- (stage 6's tc_merges_log: the base's tokens are in tc_vocab_base, so `fresh` is false)
INSERT INTO tc_merges_log
SELECT m.rank, m.left_id, m.right_id, m.id, j.count, j.words, v.token, v.blen, false
FROM tc_base_merges m JOIN tc_base_joined j USING (rank) JOIN tc_base_vocab v USING (id)
ORDER BY m.rank;

-- name: log_wordpiece
-- (stage 10's tc_wp_log; the base's scores and token counts are the engine's to add)
INSERT INTO tc_wp_log
SELECT m.rank, m.left_id, m.right_id, m.id, j.count, NULL, j.words, NULL, NULL
FROM tc_base_merges m JOIN tc_base_joined j USING (rank)
ORDER BY m.rank;

-- name: diverged_bpe
-- The replay: the merges so far from rank $since on that are not the base's (their count).
SELECT count(*)
FROM tc_merges_log l LEFT JOIN tc_base_merges b USING (rank)
WHERE l.rank >= $since
  AND (b.rank IS NULL OR l.left_id <> b.left_id OR l.right_id <> b.right_id OR l.id <> b.id);

-- name: diverged_wordpiece
SELECT count(*)
FROM tc_wp_log l LEFT JOIN tc_base_merges b USING (rank)
WHERE l.rank >= $since
  AND (b.rank IS NULL OR l.left_id <> b.left_id OR l.right_id <> b.right_id OR l.id <> b.id);
