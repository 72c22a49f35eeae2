-- Stage 13: a Unigram model's segmentation of every distinct word, by SentencePiece's Viterbi
-- (`Model::EncodeOptimized`, src/unigram_model.cc), as the SQL twin of the Polars trainer's last
-- stage: `tokcolumnar crosscheck --model unigram` compares it with the `words` table the
-- trainer wrote (docs/unigram.md, "The SQL twin").
--
-- The lattice of a word has a node for each span [s, e) of characters that is a piece (at
-- most $max_len characters), and, at each character where no one-character piece starts, an
-- unknown node over that character with SentencePiece's score for it (the lowest piece score
-- minus 10). As SentencePiece's encoder (`Model::EncodeOptimized`), the best path to each
-- character position is, over the nodes ending there, the largest sum of the best path to
-- the node's start and the node's score, the node that starts first winning a tie; the
-- word's path is read back from its last character. The sums are float64 over each word
-- alone, as HF's port (`Unigram::encode_optimized`) and our encoder (`UnigramModel`) compute
-- them: SentencePiece sums float32 over a whole sentence, whose rounding can break a tie
-- between two paths of one word (`I` + `II` against `II` + `I`) the other way, differently
-- in different sentences. Consecutive unknown characters make
-- one unknown token, as SentencePiece and HF fuse them.
--
-- In:  tc_uwords(w BIGINT, word VARCHAR): the distinct words;
--      tc_pieces(id INTEGER, piece VARCHAR, score DOUBLE): the normal pieces (no meta pieces);
--      tc_byte_pieces(piece VARCHAR, id INTEGER): the byte pieces `<0x00>`..`<0xFF>` (empty
--      without byte fallback);
--      $unk_id, $unk_score: the unknown piece's id and score; $max_len: the longest piece,
--      in characters; $byte_fallback: whether an unknown character is its bytes' pieces.
-- Out: tc_best (`first`, then `step` for $k = 1, 2, ... up to the longest word, run by the
--      caller) and the view tc_best_path(w, s, id) over it (`lattice`: the nodes of each
--      word's best path), then tc_segmentation (`segmentation`): w, ids INTEGER[], every
--      word's piece ids.

-- name: lattice
CREATE OR REPLACE TEMP TABLE tc_starts AS
SELECT w, word, n, unnest(range(n)) AS s
FROM (SELECT w, word, length(word)::INTEGER AS n FROM tc_uwords);

CREATE OR REPLACE TEMP TABLE tc_lattice AS
WITH spans AS (
    SELECT st.w, st.s, st.s + l.len AS e, substring(st.word, st.s + 1, l.len) AS piece
    FROM tc_starts st, (SELECT unnest(range(1, $max_len + 1))::INTEGER AS len) l
    WHERE st.s + l.len <= st.n
)
SELECT sp.w, sp.s::INTEGER AS s, sp.e::INTEGER AS e, p.id, p.score
FROM spans sp JOIN tc_pieces p USING (piece)
UNION ALL
-- an unknown node where no piece of one character starts (SentencePiece's `PopulateNodes`)
SELECT st.w, st.s::INTEGER, (st.s + 1)::INTEGER, $unk_id::INTEGER, $unk_score::DOUBLE
FROM tc_starts st ANTI JOIN tc_pieces p ON p.piece = substring(st.word, st.s + 1, 1);

CREATE OR REPLACE TEMP TABLE tc_best (
    w BIGINT, e INTEGER, best DOUBLE, s INTEGER, id INTEGER);

-- the nodes (w, s, id) of every word's best path, read back from its last character once the
-- steps have filled tc_best (a view: read by `segmentation`, and by stage 15's `freq`)
CREATE OR REPLACE TEMP VIEW tc_best_path AS
WITH RECURSIVE path AS (
    SELECT b.w, b.s, b.id
    FROM tc_best b JOIN tc_uwords u ON u.w = b.w AND b.e = length(u.word)
    WHERE b.e > 0
    UNION ALL
    SELECT b.w, b.s, b.id
    FROM path p JOIN tc_best b ON b.w = p.w AND b.e = p.s
    WHERE b.e > 0
)
SELECT w, s, id FROM path;

-- name: first
-- the beginning of each word: score 0, no piece
INSERT INTO tc_best SELECT w, 0, 0.0, -1, -1 FROM tc_uwords;

-- name: step
-- the best path to character $k: over the nodes ending there (each starts at a position
-- stepped before), the largest sum of the best path to its start and its score; on a
-- tie the node that starts first, as SentencePiece visits them
INSERT INTO tc_best
SELECT r.w, r.e,
       max((l.best + r.score)),
       first(r.s ORDER BY (l.best + r.score) DESC, r.s),
       first(r.id ORDER BY (l.best + r.score) DESC, r.s)
FROM tc_lattice r JOIN tc_best l ON l.w = r.w AND l.e = r.s
WHERE r.e = $k
GROUP BY r.w, r.e;

-- name: segmentation
CREATE OR REPLACE TEMP TABLE tc_segmentation AS
WITH
    path AS (SELECT w, s, id FROM tc_best_path),
    -- each node with its left neighbour's id: consecutive unknown characters are one unknown
    -- token (SentencePiece's and HF's fusing), unless byte fallback spells each one
    ordered AS (
        SELECT w, s, id, lag(id) OVER (PARTITION BY w ORDER BY s) AS left_id FROM path
    ),
    -- with byte fallback an unknown character is its UTF-8 bytes' pieces (`<0xE4>`, ...)
    unknown AS (
        SELECT p.w, p.s, hex(encode(substring(u.word, p.s + 1, 1))) AS hex
        FROM path p JOIN tc_uwords u USING (w)
        WHERE $byte_fallback AND p.id = $unk_id
    ),
    tokens AS (
        SELECT w, s, 0 AS j, id FROM ordered
        WHERE NOT (id = $unk_id AND ($byte_fallback OR coalesce(left_id = $unk_id, false)))
        UNION ALL
        SELECT k.w, k.s, k.j, bp.id
        FROM (SELECT w, s, hex, unnest(range(length(hex) // 2)) AS j FROM unknown) k
        JOIN tc_byte_pieces bp ON bp.piece = '<0x' || substring(k.hex, 2 * k.j + 1, 2) || '>'
    )
SELECT w, list(id ORDER BY s, j) AS ids FROM tokens GROUP BY w ORDER BY w;
