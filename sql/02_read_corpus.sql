-- Stage 2: read the corpus into one table of sequences.
--
-- In:  one input per run of a section, in input order $src: a plain Parquet file ($path, with
--      the text column $column), or a chunk of sequences registered by the engine (tc_chunk).
-- Out: rows appended to tc_corpus(src INTEGER, seq BIGINT, text VARCHAR): one row per sequence,
--      (src, seq) giving the corpus order.
--
-- Plain Parquet files are read here by read_parquet: one sequence per row of the column, in
-- file order (file_row_number); DuckDB gives the strings byte for byte and refuses a corrupt
-- file or invalid UTF-8. The engine first checks the column exists and holds strings, with the
-- Polars engine's messages.
--
-- Every other input is read by the Polars engine's reader (tokcolumnar/corpus.py) and appended
-- chunk by chunk (`chunk`): text files — plain, gzip, zstd, bz2, named pipes, standard input —
-- as one sequence per line *with its line ending kept* (docs/architecture.md, "Inputs"; as HF
-- `Tokenizer.train(files)`; a line longer than a chunk comes in pieces cut where the
-- pre-tokenizer cannot tell, and one with no such place for 4 x --max-word-chars bytes is
-- refused); JSONL and CSV (also compressed) and compressed Parquet as one sequence per row.
-- DuckDB's own readers would not read these as the Polars engine does: read_text loads a file
-- whole (no bound on a line's length, no pipes) and does not decompress; read_csv, DuckDB's
-- only way to decompress text, drops line endings and lone CRs, splits lines at its delimiter,
-- fails on lines over 2 MB, with strict_mode=false keeps the readable prefix of a truncated
-- file, and its CSV sniffer refuses files Arrow reads (lone-CR line ends); read_json turns a
-- column mixing strings and numbers into JSON text ("a b" with its quotes) where the Polars
-- engine refuses the file.

-- name: create
CREATE OR REPLACE TABLE tc_corpus (src INTEGER, seq BIGINT, text VARCHAR);

-- name: chunk
INSERT INTO tc_corpus SELECT $src, seq, text FROM tc_chunk;

-- name: parquet
INSERT INTO tc_corpus
SELECT $src, file_row_number, text FROM (
    SELECT file_row_number, COLUMNS(lambda c: c = $column) AS text
    FROM read_parquet($path, file_row_number = true)
);
