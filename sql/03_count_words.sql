-- Stage 3: word counting — sequences -> the `words` table.
--
-- In:  tc_corpus(src, seq, text) from stage 2; the macros of stage 1 and the Unicode tables of
--      stage 1b; $lowercase (BOOLEAN), $pretokenizer ('whitespace' | 'whitespace-split' |
--      'subword-nmt' | 'bert' | 'byte-level' | 'metaspace' | 'digits' | 'none').
-- Out: tc_words(w INTEGER, word VARCHAR, count UBIGINT, first_seen UBIGINT), one row per
--      distinct non-empty word, sorted by first_seen; w = 0, 1, ... in that order.
--
-- first_seen is the index of the word's first occurrence in the stream of all words of the
-- corpus (inputs in order, sequences in order, words left to right), exactly as the Polars
-- engine numbers them.
--
-- Normalizers. Without one (only --lowercase), `tokenize` reads tc_corpus directly. Otherwise
-- the engine copies the sequences into tc_norm(id, rare, text) (`norm_start`) and runs, in
-- order, the steps its normalizer needs, then `tokenize_norm`:
--   nfd / nfkd   norm_decompose (form nfd / nfkd, all rows), norm_reorder (all rows)
--   nfc          the `rare` rows: norm_decompose (nfd), norm_reorder, norm_compose_rare;
--                the others: norm_compose_common (DuckDB's nfc_normalize)
--   nfkc         as nfc (form nfkd for the rare rows), and the other rows first get their
--                compatibility characters replaced (norm_decompose, form compat): NFKC(s) =
--                NFC(s with every character whose NFKD differs from its NFD replaced by its NFKD)
--   bert         norm_bert_clean; with lowercase also NFD (as nfd) and norm_strip_accents
-- A step rewrites only the rows that need it (a regex test selects them); each rewritten row
-- is exploded into characters, joined with the tables of stage 1b and put back together in
-- order. `rare` rows hold a character of a newer Unicode version than DuckDB's utf8proc knows
-- (tc_has_newer): they are composed by norm_compose_rare, the canonical composition algorithm
-- of Rust's unicode-normalization crate as a recursive query, instead of nfc_normalize.
-- Decomposition, combining classes and compositions all come from the measured tables, so the
-- result is the Polars engine's on every input.

-- name: tokenize
CREATE OR REPLACE TABLE tc_tok AS
SELECT src, seq,
       tc_pretokenize(CASE WHEN $lowercase THEN tc_lowercase(text) ELSE text END, $pretokenizer)
           AS pieces
FROM tc_corpus
WHERE text IS NOT NULL;

-- name: norm_start
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT row_number() OVER (ORDER BY src, seq) AS id, $exact AND tc_has_newer(text) AS rare, text
FROM tc_corpus
WHERE text IS NOT NULL;

-- name: norm_bert_clean
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT id, rare, tc_bert_clean(text, $clean, $chinese) AS text FROM tc_norm;

-- name: norm_decompose
-- $form: 'nfd' (canonical), 'nfkd' (compatibility), 'compat' (only characters whose NFKD
-- differs from their NFD; Hangul left alone); $rows: 'all' | 'rare' | 'common'.
CREATE OR REPLACE TEMP TABLE tc_norm_fix AS
SELECT x.id,
       string_agg(CASE $form WHEN 'nfd' THEN coalesce(m.nfd, tc_hangul_nfd(x.ch))
                             WHEN 'nfkd' THEN coalesce(m.compat, m.nfd, tc_hangul_nfd(x.ch))
                             ELSE coalesce(m.compat, x.ch) END, '' ORDER BY x.pos) AS text
FROM (
    SELECT id, unnest(cs) AS ch, unnest(range(len(cs))) AS pos
    FROM (SELECT id, string_split(text, '') AS cs FROM tc_norm
          WHERE tc_has_decomposable(text, $form)
            AND CASE $rows WHEN 'all' THEN true WHEN 'rare' THEN rare ELSE NOT rare END)
) x
LEFT JOIN tc_uni_decomp m ON m.c = x.ch
GROUP BY x.id;
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT n.id, n.rare, coalesce(f.text, n.text) AS text
FROM tc_norm n LEFT JOIN tc_norm_fix f ON f.id = n.id;

-- name: norm_reorder
-- Canonical reordering: within each run of non-starters, a stable sort by combining class
-- (key: the last starter before the character, its class, its position).
CREATE OR REPLACE TEMP TABLE tc_norm_fix AS
SELECT id, string_agg(ch, '' ORDER BY seg, ccc, pos) AS text
FROM (
    SELECT id, ch, pos, ccc,
           coalesce(max(CASE WHEN ccc = 0 THEN pos END)
                        OVER (PARTITION BY id ORDER BY pos ROWS UNBOUNDED PRECEDING), -1) AS seg
    FROM (
        SELECT x.id, x.ch, x.pos, coalesce(k.ccc, 0) AS ccc
        FROM (
            SELECT id, unnest(cs) AS ch, unnest(range(len(cs))) AS pos
            FROM (SELECT id, string_split(text, '') AS cs FROM tc_norm
                  WHERE tc_has_nonstarter_pair(text)
                    AND CASE $rows WHEN 'all' THEN true WHEN 'rare' THEN rare ELSE NOT rare END)
        ) x
        LEFT JOIN tc_uni_ccc k ON k.c = x.ch
    )
)
GROUP BY id;
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT n.id, n.rare, coalesce(f.text, n.text) AS text
FROM tc_norm n LEFT JOIN tc_norm_fix f ON f.id = n.id;

-- name: norm_compose_common
-- nfc_normalize stops at a NUL character: such rows are normalized piece by piece (NUL is a
-- starter that composes with nothing, so NFC(a NUL b) = NFC(a) NUL NFC(b)).
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT id, rare,
       CASE WHEN rare THEN text
            WHEN strpos(text, chr(0)) > 0
            THEN array_to_string(list_transform(string_split(text, chr(0)),
                                                lambda x: nfc_normalize(x)), chr(0))
            ELSE nfc_normalize(text) END AS text
FROM tc_norm;

-- name: norm_compose_rare
-- Canonical composition of the (decomposed, reordered) rare rows, character by character as
-- unicode-normalization's Recompositions does: `k` the starter being composed, `buf` the
-- characters kept after it, `lc` the class of the last of them (NULL: none). A character
-- composes with `k` when it is not blocked (lc NULL, or lc below its class) and the pair has
-- a primary composite (tc_uni_compose, or Hangul L+V / LV+T arithmetic).
-- The recursion runs over segments, not whole rows (a long line must not take one step per
-- character with its whole state copied): a segment starts at each starter that is never the
-- second character of a composition. Nothing composes or reorders across such a starter, and
-- the algorithm is in the same state after it as at the start of a segment.
CREATE OR REPLACE TEMP TABLE tc_norm_fix AS
WITH RECURSIVE
chars AS (
    SELECT x.id, x.pos, x.ch, coalesce(k.ccc, 0) AS ccc,
           k.ccc IS NULL AND s.b IS NULL AND unicode(x.ch) NOT BETWEEN 4449 AND 4469
               AND unicode(x.ch) NOT BETWEEN 4520 AND 4546 AS boundary
    FROM (
        SELECT id, unnest(cs) AS ch, unnest(range(len(cs))) AS pos
        FROM (SELECT id, string_split(text, '') AS cs FROM tc_norm WHERE rare)
    ) x
    LEFT JOIN tc_uni_ccc k ON k.c = x.ch
    LEFT JOIN (SELECT DISTINCT b FROM tc_uni_compose) s ON s.b = x.ch
),
segs AS (
    SELECT id, seg, list(ch ORDER BY pos) AS cs, list(ccc ORDER BY pos) AS cc
    FROM (SELECT *, sum(boundary::INTEGER) OVER (PARTITION BY id ORDER BY pos
                                                 ROWS UNBOUNDED PRECEDING) AS seg
          FROM chars)
    GROUP BY id, seg
),
st(id, seg, i, n, cs, cc, out, k, buf, lc) AS (
    SELECT id, seg, 0, len(cs), cs, cc, '', NULL::VARCHAR, '', NULL::INTEGER FROM segs
    UNION ALL
    SELECT id, seg, i + 1, n, cs, cc,
           CASE WHEN k IS NULL THEN CASE WHEN c = 0 THEN out ELSE out || ch END
                WHEN (lc IS NULL OR lc < c) AND r IS NOT NULL THEN out
                WHEN c = 0 THEN out || k || buf
                ELSE out END,
           CASE WHEN k IS NULL THEN CASE WHEN c = 0 THEN ch END
                WHEN (lc IS NULL OR lc < c) AND r IS NOT NULL THEN r
                WHEN c = 0 THEN ch
                ELSE k END,
           CASE WHEN k IS NULL OR ((lc IS NULL OR lc < c) AND r IS NOT NULL) THEN buf
                WHEN c = 0 THEN ''
                ELSE buf || ch END,
           CASE WHEN k IS NULL OR ((lc IS NULL OR lc < c) AND r IS NOT NULL) THEN lc
                WHEN c = 0 THEN NULL
                ELSE c END
    FROM (
        SELECT s.*, s.cs[s.i + 1] AS ch, s.cc[s.i + 1] AS c,
               coalesce(p.c,
                        CASE WHEN unicode(s.k) BETWEEN 4352 AND 4370
                                  AND unicode(s.cs[s.i + 1]) BETWEEN 4449 AND 4469
                             THEN chr(44032 + ((unicode(s.k) - 4352) * 21
                                               + unicode(s.cs[s.i + 1]) - 4449) * 28)
                             WHEN unicode(s.k) BETWEEN 44032 AND 55203
                                  AND (unicode(s.k) - 44032) % 28 = 0
                                  AND unicode(s.cs[s.i + 1]) BETWEEN 4520 AND 4546
                             THEN chr(unicode(s.k) + unicode(s.cs[s.i + 1]) - 4519)
                        END) AS r
        FROM st s
        LEFT JOIN tc_uni_compose p ON p.a = s.k AND p.b = s.cs[s.i + 1]
        WHERE s.i < s.n
    )
)
SELECT id, string_agg(out || coalesce(k, '') || buf, '' ORDER BY seg) AS text
FROM st WHERE i = n GROUP BY id;
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT n.id, n.rare, coalesce(f.text, n.text) AS text
FROM tc_norm n LEFT JOIN tc_norm_fix f ON f.id = n.id;

-- name: norm_strip_accents
CREATE OR REPLACE TEMP TABLE tc_norm AS
SELECT id, rare, tc_strip_nonspacing(text) AS text FROM tc_norm;

-- name: tokenize_norm
CREATE OR REPLACE TABLE tc_tok AS
SELECT 0 AS src, id AS seq,
       tc_pretokenize(CASE WHEN $lowercase THEN tc_lowercase(text) ELSE text END, $pretokenizer)
           AS pieces
FROM tc_norm;

-- name: count
CREATE OR REPLACE TABLE tc_words AS
WITH offsets AS (
    SELECT pieces,
           coalesce(sum(len(pieces)) OVER (ORDER BY src, seq
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS off
    FROM tc_tok
),
occurrences AS (
    SELECT unnest(pieces) AS word, off + unnest(range(len(pieces))) AS pos FROM offsets
),
counted AS (
    SELECT word, count(*) AS count, min(pos) AS first_seen
    FROM occurrences
    WHERE word <> ''
    GROUP BY word
)
SELECT (row_number() OVER (ORDER BY first_seen) - 1)::INTEGER AS w, word,
       count::UBIGINT AS count, first_seen::UBIGINT AS first_seen
FROM counted
ORDER BY first_seen;

-- name: byte_level_words
-- byte-level: the pieces were counted as split (escaped, see stage 1); each distinct one now
-- becomes its GPT-2 byte characters (one-to-one, so counts and order stay).
UPDATE tc_words SET word = tc_byte_level_word(word);

-- name: stats
SELECT count(*) AS words, coalesce(max(length(word)), 0) AS longest FROM tc_words;

-- name: from_frame
-- A words table (from the counting stage, or a counts file read and normalised in Python:
-- tokcolumnar/corpus/counts_file.py), registered as tc_counts_input, row order kept.
CREATE OR REPLACE TABLE tc_words AS
SELECT (row_number() OVER (ORDER BY tc_row) - 1)::INTEGER AS w, word,
       count::UBIGINT AS count, first_seen::UBIGINT AS first_seen
FROM tc_counts_input
ORDER BY tc_row;
