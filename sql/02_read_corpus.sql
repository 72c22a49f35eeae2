-- Stage 2: read the corpus into one table of sequences.
--
-- In:  one input file per run of a section ($path, its input order $src), and for the column
--      formats the column name $column. Which section runs depends on the file's format.
-- Out: rows appended to tc_corpus(src INTEGER, seq BIGINT, text VARCHAR): one row per sequence,
--      (src, seq) giving the corpus order.
--
-- Text files: each line is one sequence *with its line ending kept* (DESIGN.md §2, as HF
-- `Tokenizer.train(files)`): the file is read whole by read_text, split at "\n", and "\n" is put
-- back on every piece but the last ("\r\n" keeps its "\r", which stays in the piece).
-- Compressed text (.gz/.zst, $compression 'gzip' | 'zstd') goes through read_csv, which
-- decompresses but strips line endings: the engine uses it with the pre-tokenizers that drop
-- whitespace anyway (whitespace, whitespace-split, subword-nmt, bert).
-- Parquet / JSONL / CSV: one sequence per row of the chosen column (JSONL / CSV may be gzip or
-- zstd compressed).
-- What DuckDB cannot read as the Polars engine does (bz2 files, compressed Parquet, gzip / zstd
-- text for the pre-tokenizers that see line endings) is decompressed and read in Python by the
-- Polars engine's reader and appended chunk by chunk (`chunk`: a registered frame tc_chunk).

-- name: create
CREATE OR REPLACE TABLE tc_corpus (src INTEGER, seq BIGINT, text VARCHAR);

-- name: text
INSERT INTO tc_corpus
SELECT $src, seq, CASE WHEN seq < n THEN piece || chr(10) ELSE piece END
FROM (
    SELECT unnest(pieces) AS piece, unnest(range(len(pieces))) + 1 AS seq, len(pieces) AS n
    FROM (SELECT string_split(content, chr(10)) AS pieces FROM read_text($path))
);

-- name: text_compressed
-- read_csv with a delimiter that never occurs and no quoting: one row per line (line ending
-- dropped; blank lines come back as NULL). CREATE TABLE keeps the file order in rowid.
CREATE OR REPLACE TEMP TABLE tc_lines AS
SELECT line FROM read_csv($path, columns = {'line': 'VARCHAR'}, delim = chr(31) || chr(30) || chr(29),
                          quote = '', escape = '', header = false, auto_detect = false,
                          strict_mode = false, null_padding = true, compression = $compression);
INSERT INTO tc_corpus SELECT $src, rowid, line FROM tc_lines;

-- name: chunk
INSERT INTO tc_corpus SELECT $src, seq, text FROM tc_chunk;

-- name: parquet
INSERT INTO tc_corpus
SELECT $src, file_row_number, text FROM (
    SELECT file_row_number, COLUMNS(lambda c: c = $column) AS text
    FROM read_parquet($path, file_row_number = true)
);

-- name: jsonl
CREATE OR REPLACE TEMP TABLE tc_rows AS
SELECT COLUMNS(lambda c: c = $column) AS text
FROM read_json($path, format = 'newline_delimited', compression = $compression);
INSERT INTO tc_corpus SELECT $src, rowid, text FROM tc_rows;

-- name: csv
CREATE OR REPLACE TEMP TABLE tc_rows AS
SELECT COLUMNS(lambda c: c = $column) AS text
FROM read_csv($path, header = true, all_varchar = true, delim = $delim, quote = '"', escape = '"',
              compression = $compression);
INSERT INTO tc_corpus SELECT $src, rowid, text FROM tc_rows;

-- name: peek_parquet
-- Zero rows, for the column names and types (a missing --column is reported clearly).
SELECT * FROM read_parquet($path) LIMIT 0;

-- name: peek_jsonl
SELECT * FROM read_json($path, format = 'newline_delimited', compression = $compression) LIMIT 0;

-- name: peek_csv
SELECT * FROM read_csv($path, header = true, all_varchar = true, delim = $delim, quote = '"',
                       escape = '"', compression = $compression) LIMIT 0;
