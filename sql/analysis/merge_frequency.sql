-- Merge count by rank: the frequency curve of a BPE training run.
-- In: the `merges` view of `tokcolumnar sql DIR`. Out: one row per block of $block ranks
-- (getvariable('block'), default 1000): first rank, merges, highest / lowest / mean pair count
-- when chosen, and the words touched.
-- Usage: tokcolumnar sql DIR --query merge_frequency
--        tokcolumnar sql DIR --query merge_frequency --param block=100
SELECT rank // coalesce(getvariable('block'), 1000) * coalesce(getvariable('block'), 1000)
           AS from_rank,
       count(*) AS merges,
       max(count) AS max_count,
       min(count) AS min_count,
       round(avg(count), 1) AS mean_count,
       sum(words)::UBIGINT AS words_touched
FROM merges
GROUP BY from_rank
ORDER BY from_rank;
