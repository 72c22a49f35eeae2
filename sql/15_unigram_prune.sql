-- Stage 15: one pruning round of the Unigram trainer (`PruneSentencePieces`,
-- src/unigram_model_trainer.cc; docs/unigram.md, 5.2), as the SQL twin of the Polars trainer's:
-- given the pieces and scores after a round's EM iterations, each piece's 2-best segmentation
-- of its own string, every piece's Viterbi frequency over the words, the loss of dropping each
-- candidate, the size to prune to and the pieces kept. `tokcolumnar crosscheck --model unigram`
-- runs it on the trainer's pieces before each pruning and compares with the trainer's pieces
-- after it (docs/unigram.md, "The SQL twin").
--
-- The Viterbi over the words is stage 13's (`lattice`, `first`, `step` of
-- sql/13_unigram_viterbi.sql, run first by the caller with the unknown piece id 0 and score
-- min - 10, as SentencePiece's trainer builds the lattices). Sums are float64 where
-- SentencePiece sums float32: the losses agree to float32 rounding, so two candidates whose
-- losses are that close to the cut may be ranked the other way (the caller reports them).
--
-- In:  tc_uwords(w BIGINT, word VARCHAR, cnt BIGINT): the distinct words and their counts;
--      tc_pieces(id INTEGER, piece VARCHAR, score DOUBLE): the pieces, id = their position in
--      the model; tc_best_path(w, s, id) of stage 13 (its Viterbi over the words: the
--      nodes of each word's best path);
--      $max_len: the longest piece, in characters; $unk_score: the unknown node's score;
--      $d (`two_best_step`): a distance from the end of the strings, 1, 2, ... $max_len;
--      $desired (int(vocab_size × 1.1)), $shrinking_factor (float32): the size to prune to.
-- Out: tc_pr_nodes(p, n, s, e, id, score): each piece's lattice of its own string (`own_lattice`);
--      tc_pr_best(p, pos, rank, score, ids): the two best paths from each position to the
--      string's end (`two_best_init`, then `two_best_step` for $d = 1 ... $max_len);
--      tc_pr_freq(id, freq): the Viterbi frequencies (`freq`);
--      tc_pr_pieces(id, piece, reason, freq, loss, rank, kept) (`prune`): every piece, why it
--      goes (NULL: no reason to), its loss when it is a candidate, its rank among the
--      candidates, and whether it stays (the kept pieces: those with no alternative, then
--      the candidates by loss).

-- name: own_lattice
-- the lattice of each piece's string, as stage 13's of a word: a node for each span that is a
-- piece, an unknown node (id 0) where no piece of one character starts
CREATE OR REPLACE TEMP TABLE tc_pr_nodes AS
WITH starts AS (
    SELECT id AS p, piece, n, unnest(range(n)) AS s
    FROM (SELECT id, piece, length(piece)::INTEGER AS n FROM tc_pieces)
),
spans AS (
    SELECT st.p, st.n, st.s, st.s + l.len AS e, substring(st.piece, st.s + 1, l.len) AS piece
    FROM starts st, (SELECT unnest(range(1, $max_len + 1))::INTEGER AS len) l
    WHERE st.s + l.len <= st.n
)
SELECT sp.p, sp.n, sp.s::INTEGER AS s, sp.e::INTEGER AS e, x.id, x.score
FROM spans sp JOIN tc_pieces x USING (piece)
UNION ALL
SELECT st.p, st.n, st.s::INTEGER, (st.s + 1)::INTEGER, 0, $unk_score::DOUBLE
FROM starts st ANTI JOIN tc_pieces x ON x.piece = substring(st.piece, st.s + 1, 1);

-- name: two_best_init
-- from the end of each string: one empty path of score 0
CREATE OR REPLACE TEMP TABLE tc_pr_best (
    p INTEGER, pos INTEGER, rank BIGINT, score DOUBLE, ids INTEGER[]);
INSERT INTO tc_pr_best SELECT id, length(piece)::INTEGER, 1, 0.0, [] FROM tc_pieces;

-- name: two_best_step
-- the two best paths from the position $d characters before each string's end: over the
-- nodes starting there, the node followed by the best or the second best path from its end
-- (`Lattice::NBest(2)`, a path scored from its right end); ties go to the shorter node, then
-- to its best continuation, as the trainer orders them
INSERT INTO tc_pr_best
SELECT p, s, rank, score, ids
FROM (SELECT x.p, x.s, x.score + b.score AS score, [x.id] || b.ids AS ids,
             row_number() OVER (PARTITION BY x.p
                                ORDER BY x.score + b.score DESC, x.e - x.s, b.rank) AS rank
      FROM tc_pr_nodes x JOIN tc_pr_best b ON b.p = x.p AND b.pos = x.e
      WHERE x.n - x.s = $d)
WHERE rank <= 2;

-- name: freq
-- every piece's frequency: the word counts summed over the nodes of the words' best paths
-- (stage 13's view tc_best_path; each unknown node counts for piece 0)
CREATE OR REPLACE TEMP TABLE tc_pr_freq AS
SELECT x.id, coalesce(sum(u.cnt), 0)::DOUBLE AS freq
FROM tc_pieces x
LEFT JOIN (tc_best_path path JOIN tc_uwords u USING (w)) ON path.id = x.id
GROUP BY x.id;

-- name: prune
CREATE OR REPLACE TEMP TABLE tc_pr_pieces AS
WITH
    -- each piece's own segmentations: a single path (a character, or no other way), the best
    -- path of 2+ nodes (it can never be chosen), or the piece itself with an alternative
    own AS (
        SELECT p,
               count(*) AS paths,
               max(len(ids)) FILTER (rank = 1) AS best_len,
               max(ids) FILTER (rank = 2) AS alt
        FROM tc_pr_best WHERE pos = 0 GROUP BY p
    ),
    total AS (SELECT sum(freq) AS total FROM tc_pr_freq),
    piece AS (
        SELECT x.id, x.piece, f.freq,
               CASE WHEN o.paths = 2 AND o.best_len >= 2 THEN 'never_best'
                    WHEN f.freq = 0 THEN 'unused' END AS gone,
               CASE WHEN o.paths = 2 AND o.best_len = 1 THEN o.alt END AS alt
        FROM tc_pieces x JOIN own o ON o.p = x.id JOIN tc_pr_freq f ON f.id = x.id
    ),
    -- the loss of dropping a candidate: its share of the tokens times the log probability it
    -- has minus that of its alternative, whose pieces each gain its frequency
    -- (F × (log P(piece) − Σ log P'(alternative)), docs/unigram.md 5.2.4)
    alt_terms AS (
        SELECT c.id, c.freq, len(c.alt) AS n_alt, fa.freq AS alt_freq
        FROM (SELECT id, freq, alt, unnest(alt) AS a FROM piece
              WHERE gone IS NULL AND alt IS NOT NULL) c
        JOIN tc_pr_freq fa ON fa.id = c.a
    ),
    loss AS (
        SELECT t.id,
               (t.freq / total.total)
               * ((ln(t.freq) - ln(total.total))
                  - sum(ln(t.alt_freq + t.freq) - ln(total.total + t.freq * (t.n_alt - 1))))
                   AS loss
        FROM alt_terms t, total
        GROUP BY t.id, t.freq, total.total
    ),
    ranked AS (
        SELECT piece.*, loss.loss,
               CASE WHEN loss.loss IS NOT NULL
                    THEN row_number() OVER (PARTITION BY loss.loss IS NOT NULL
                                            ORDER BY loss.loss DESC, piece.id) END AS rank
        FROM piece LEFT JOIN loss USING (id)
    ),
    -- the size to prune to: max(desired, float32(shrinking factor × pieces)), and how many
    -- candidates follow the pieces kept without a loss (all of them when those alone exceed
    -- it: SentencePiece stops when the count equals the size)
    size AS (
        SELECT greatest($desired::BIGINT,
                        trunc($shrinking_factor::FLOAT * count(*)::FLOAT)::BIGINT) AS size,
               count(*) FILTER (gone IS NULL AND alt IS NULL) AS plain
        FROM piece
    )
SELECT r.id, r.piece,
       CASE WHEN r.gone IS NOT NULL THEN r.gone
            WHEN r.rank IS NOT NULL AND size.size >= size.plain
                 AND r.rank > size.size - size.plain THEN 'loss' END AS reason,
       r.freq, r.loss, r.rank,
       reason IS NULL AS kept
FROM ranked r, size
ORDER BY r.id;
