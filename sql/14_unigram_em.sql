-- Stage 14: one EM iteration of the Unigram trainer (`RunEStep` and `RunMStep`,
-- src/unigram_model_trainer.cc; docs/unigram.md, 5.1), as the SQL twin of the Polars trainer's:
-- given the pieces and scores an iteration starts from, the expected count of every piece over
-- the distinct words (forward-backward over each word's lattice), then the pieces kept and
-- their new scores. `tokcolumnar crosscheck --model unigram` runs it on the trainer's own
-- pieces before each iteration and compares with the trainer's pieces after it
-- (docs/unigram.md, "The SQL twin").
--
-- The lattices are stage 13's (`lattice` of sql/13_unigram_viterbi.sql, run first by the
-- caller with the unknown piece id 0 and score min - 10, as SentencePiece's trainer builds
-- them). The sums are float64 and the log-sum-exp exact (max + ln(sum(exp(x - max)))), where
-- SentencePiece sums float32 in its thread order and cuts terms 50 below the maximum: the
-- results agree to float32 rounding, not bit for bit.
--
-- In:  tc_uwords(w BIGINT, word VARCHAR, cnt BIGINT): the distinct words and their counts;
--      tc_pieces(id INTEGER, piece VARCHAR, score DOUBLE): the pieces (id = their position in
--      the model, piece 0 also the unknown characters'), and tc_lattice(w, s, e, id, score)
--      of stage 13 over them;
--      $k (`forward`, `backward`): the character position of one step.
-- Out: tc_alpha(w, pos, a) and tc_beta(w, pos, b): the forward and backward log sums at each
--      character position (`init`, then `forward` for $k = 1, 2, ... and `backward` for
--      $k = longest word - 1 down to 0, run by the caller);
--      tc_expected(id, expected) (`e_step`): every piece's expected count, weighted by the
--      word counts (0 for a piece in no lattice);
--      tc_em_model(id, piece, expected, score) (`m_step`): the pieces kept, in their order,
--      with their new scores.
--      The macro tc_digamma(x): SentencePiece's digamma (double).

-- name: macros
-- SentencePiece's Digamma, as `tokcolumnar.training.unigram.digamma`: the recurrence
-- psi(x) = psi(x + 1) - 1/x while x < 7 (at most 8 times), in order, then the asymptotic series
-- at x - 1/2. The recurrence is a fold over a state {x, r} (DuckDB's list_reduce: the first
-- element is the start, the 8 others only count the steps).
CREATE OR REPLACE MACRO tc_digamma_up(x) AS list_reduce(
    [{'x': x::DOUBLE, 'r': 0.0::DOUBLE}]
        || list_transform(range(8), lambda i: {'x': 0.0::DOUBLE, 'r': 0.0::DOUBLE}),
    lambda acc, step: CASE WHEN acc.x < 7 THEN {'x': acc.x + 1, 'r': acc.r - 1 / acc.x}
                           ELSE acc END);
-- the series at y = x - 1/2, term by term in the C++ order (xx = 1/y, xx2 = xx², xx4 = xx2²)
CREATE OR REPLACE MACRO tc_digamma_series(y) AS
    ln(y) + (1.0::DOUBLE / 24.0::DOUBLE) * ((1 / y) * (1 / y))
    - (7.0::DOUBLE / 960.0::DOUBLE) * (((1 / y) * (1 / y)) * ((1 / y) * (1 / y)))
    + (31.0::DOUBLE / 8064.0::DOUBLE) * (((1 / y) * (1 / y)) * ((1 / y) * (1 / y)))
        * ((1 / y) * (1 / y))
    - (127.0::DOUBLE / 30720.0::DOUBLE) * (((1 / y) * (1 / y)) * ((1 / y) * (1 / y)))
        * (((1 / y) * (1 / y)) * ((1 / y) * (1 / y)));
CREATE OR REPLACE MACRO tc_digamma_of(st) AS st.r + tc_digamma_series(st.x - 0.5::DOUBLE);
CREATE OR REPLACE MACRO tc_digamma(x) AS tc_digamma_of(tc_digamma_up(x));

-- name: init
-- the nodes in the order the steps read them: by end for the forward pass, by start for the
-- backward one (a step's filter then skips the other row groups)
CREATE OR REPLACE TEMP TABLE tc_em_by_end AS
SELECT w, s, e, score FROM tc_lattice ORDER BY e, w;
CREATE OR REPLACE TEMP TABLE tc_em_by_start AS
SELECT w, s, e, score FROM tc_lattice ORDER BY s, w;
-- the forward sum before a word's first character is 0 (log 1), the backward sum after its
-- last character too
CREATE OR REPLACE TEMP TABLE tc_alpha (w BIGINT, pos INTEGER, a DOUBLE);
INSERT INTO tc_alpha SELECT w, 0, 0.0 FROM tc_uwords;
CREATE OR REPLACE TEMP TABLE tc_beta (w BIGINT, pos INTEGER, b DOUBLE);
INSERT INTO tc_beta SELECT w, length(word)::INTEGER, 0.0 FROM tc_uwords;

-- name: forward
-- alpha at character $k: the log-sum-exp, over the nodes ending there, of alpha at the node's
-- start plus its score (SentencePiece's `alpha` of every node starting at $k)
INSERT INTO tc_alpha
SELECT w, $k, m + ln(sum(exp(x - m)))
FROM (SELECT r.w, l.a + r.score AS x, max(l.a + r.score) OVER (PARTITION BY r.w) AS m
      FROM tc_em_by_end r JOIN tc_alpha l ON l.w = r.w AND l.pos = r.s
      WHERE r.e = $k)
GROUP BY w, m;

-- name: backward
-- beta at character $k: the log-sum-exp, over the nodes starting there, of the node's score
-- plus beta at its end (SentencePiece's `beta` of every node ending at $k)
INSERT INTO tc_beta
SELECT w, $k, m + ln(sum(exp(x - m)))
FROM (SELECT r.w, r.score + l.b AS x, max(r.score + l.b) OVER (PARTITION BY r.w) AS m
      FROM tc_em_by_start r JOIN tc_beta l ON l.w = r.w AND l.pos = r.e
      WHERE r.s = $k)
GROUP BY w, m;

-- name: e_step
-- each node's marginal exp(alpha(start) + score + beta(end) - Z), Z = alpha at the word's end,
-- times the word's count, summed per piece (the unknown nodes' into piece 0, as SentencePiece)
CREATE OR REPLACE TEMP TABLE tc_expected AS
WITH z AS (
    SELECT a.w, a.a AS z FROM tc_alpha a JOIN tc_uwords u ON u.w = a.w AND a.pos = length(u.word)
),
node AS (
    SELECT n.id, u.cnt * exp(al.a + n.score + be.b - z.z) AS m
    FROM tc_lattice n
    JOIN tc_uwords u ON u.w = n.w
    JOIN z ON z.w = n.w
    JOIN tc_alpha al ON al.w = n.w AND al.pos = n.s
    JOIN tc_beta be ON be.w = n.w AND be.pos = n.e
)
SELECT p.id, coalesce(sum(node.m), 0.0)::DOUBLE AS expected
FROM tc_pieces p LEFT JOIN node ON node.id = p.id
GROUP BY p.id;

-- name: m_step
-- the "Bayesianified" M-step: a piece expected fewer than 0.5 times goes; the others, in their
-- order, score digamma(expected) - digamma(the kept expectations' sum)
CREATE OR REPLACE TEMP TABLE tc_em_model AS
WITH kept AS (
    SELECT p.id, p.piece, e.expected
    FROM tc_pieces p JOIN tc_expected e USING (id)
    WHERE e.expected >= 0.5
)
SELECT id, piece, expected,
       tc_digamma(expected) - tc_digamma(sum(expected) OVER ()) AS score
FROM kept
ORDER BY id;
