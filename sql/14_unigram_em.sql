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
-- them). Within a word the arithmetic is SentencePiece's: the forward and backward sums are
-- float32 (DuckDB's FLOAT), folded over a position's nodes in its list order with its
-- LogSumExp, so they come out as the trainer's (a float32 sum over a Chinese line of 3,000
-- characters is off by ~0.01 from the exact one: compared with a float64 fold, the expected
-- counts of such words differed by ~1%). Across words the expected counts are summed in
-- float64 where SentencePiece sums float32 in its thread order: the results agree to that
-- rounding, not bit for bit.
--
-- In:  tc_uwords(w BIGINT, word VARCHAR, cnt BIGINT): the distinct words and their counts;
--      tc_pieces(id INTEGER, piece VARCHAR, score DOUBLE): the pieces (id = their position in
--      the model, piece 0 also the unknown characters'), and tc_lattice(w, s, e, id, score)
--      of stage 13 over them;
--      $k (`forward`, `backward`): the character position of one step.
-- Out: tc_alpha(w, pos, a) and tc_beta(w, pos, b): the forward and backward log sums (FLOAT) at each
--      character position (`init`, then `forward` for $k = 1, 2, ... and `backward` for
--      $k = longest word - 1 down to 0, run by the caller);
--      tc_expected(id, expected) (`e_step`): every piece's expected count, weighted by the
--      word counts (0 for a piece in no lattice);
--      tc_em_model(id, piece, expected, score) (`m_step`): the pieces kept, in their order,
--      with their new scores.
--      The macros tc_digamma(x): SentencePiece's digamma (double), tc_lse32(x, y): its
--      LogSumExp of two float32 values.

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

-- SentencePiece's LogSumExp of two float32 values (the exp and log1p in double): the larger
-- one if it exceeds the other by more than 50, else max + log1p(exp(min - max)) rounded to
-- float32. DuckDB has no log1p: below 1e-4 its series to the third order (exact in float32)
CREATE OR REPLACE MACRO tc_log1p(e) AS
    CASE WHEN e < 1e-4 THEN e * (1 - e * (0.5 - e / 3)) ELSE ln(1 + e) END;
CREATE OR REPLACE MACRO tc_lse32(x, y) AS
    CASE WHEN greatest(x, y) > least(x, y) + 50::FLOAT THEN greatest(x, y)
         ELSE (greatest(x, y)::DOUBLE
               + tc_log1p(exp((least(x, y) - greatest(x, y))::DOUBLE)))::FLOAT END;

-- name: init
-- the nodes in the order the steps read them: by end for the forward pass, by start for the
-- backward one (a step's filter then skips the other row groups)
CREATE OR REPLACE TEMP TABLE tc_em_by_end AS
SELECT w, s, e, score::FLOAT AS score FROM tc_lattice ORDER BY e, w;
CREATE OR REPLACE TEMP TABLE tc_em_by_start AS
SELECT w, s, e, score::FLOAT AS score FROM tc_lattice ORDER BY s, w;
-- the forward sum before a word's first character is 0 (log 1), the backward sum after its
-- last character too
CREATE OR REPLACE TEMP TABLE tc_alpha (w BIGINT, pos INTEGER, a FLOAT);
INSERT INTO tc_alpha SELECT w, 0, 0.0 FROM tc_uwords;
CREATE OR REPLACE TEMP TABLE tc_beta (w BIGINT, pos INTEGER, b FLOAT);
INSERT INTO tc_beta SELECT w, length(word)::INTEGER, 0.0 FROM tc_uwords;

-- name: forward
-- alpha at character $k (SentencePiece's `alpha` of every node starting there): over the
-- nodes ending at $k in its `end_nodes` order (the earliest start first), alpha at the node's
-- start plus its score, in float32, folded by LogSumExp from the first term as it is
INSERT INTO tc_alpha
SELECT r.w, $k, list_reduce(list(r.score + l.a ORDER BY r.s), lambda acc, y: tc_lse32(acc, y))
FROM tc_em_by_end r JOIN tc_alpha l ON l.w = r.w AND l.pos = r.s
WHERE r.e = $k
GROUP BY r.w;

-- name: backward
-- beta at character $k (SentencePiece's `beta` of every node ending there): over the nodes
-- starting at $k in its `begin_nodes` order (the shortest first), the node's score plus beta
-- at its end, in float32, folded by LogSumExp from the first term as it is
INSERT INTO tc_beta
SELECT r.w, $k, list_reduce(list(r.score + l.b ORDER BY r.e), lambda acc, y: tc_lse32(acc, y))
FROM tc_em_by_start r JOIN tc_beta l ON l.w = r.w AND l.pos = r.e
WHERE r.s = $k
GROUP BY r.w;

-- name: e_step
-- each node's marginal exp(((alpha(start) + score) + beta(end)) - Z) (the exponent in float32,
-- the exp in double), Z = alpha at the word's end, times the word's count, summed per piece in
-- float64 (the unknown nodes' into piece 0, as SentencePiece)
CREATE OR REPLACE TEMP TABLE tc_expected AS
WITH z AS (
    SELECT a.w, a.a AS z FROM tc_alpha a JOIN tc_uwords u ON u.w = a.w AND a.pos = length(u.word)
),
node AS (
    SELECT n.id, u.cnt * exp((((al.a + n.score::FLOAT) + be.b) - z.z)::DOUBLE) AS m
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
