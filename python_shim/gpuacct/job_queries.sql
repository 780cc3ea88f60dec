-- The job-view queries (docs/job_view.md, *Queries*), written once for both engines: DuckDB
-- (the embedded default) and Spark SQL (local mode or a cluster) run this text unchanged.
--
-- Tables: `steps` (job_steps.csv) and `collectives` (job_collectives.csv) of a Parquet dataset
-- written by gpuacct.job.export_parquet.  Parameters: `{include_warmup}` (0 or 1) is replaced
-- by an integer before the query runs; nothing else is substituted.
--
-- Rules that keep the two engines' answers identical (tests/python/test_job.py checks it):
--   * percentiles are percentile_disc (a value of the data: the smallest value with at least
--     p of the values <= it), never percentile_cont, whose interpolation the engines compute
--     in different float order (they differ in the last bits);
--   * means are CAST(SUM(x) AS DOUBLE) / COUNT: the integer sum is exact in both engines, so
--     the one division is the same IEEE operation (AVG on Spark sums doubles);
--   * size buckets compare integers (no log2, which is not exact at powers of two);
--   * every ORDER BY is total (ties broken by job, host, rank) and says NULLS LAST where NULLs
--     can occur (the engines' defaults differ);
--   * no division by zero (Spark's ANSI mode raises, DuckDB returns NULL).
-- A block starts with `-- name:`; `-- purpose:` lines are its documentation.

-- name: slowest_ranks
-- purpose: Ranks ordered by the time they made others wait (sum of late_ns) and then by their mean
-- purpose: step time: the straggler comes first.  own_ns = step time minus the time the
-- purpose: rank's collectives waited for a later rank (waited_ns): the rank's own work.
SELECT job, host, rank,
       COUNT(*) AS steps,
       SUM(late_ns) AS made_others_wait_ns,
       SUM(CASE WHEN late_ns > 0 THEN 1 ELSE 0 END) AS late_steps,
       CAST(SUM(late_ns) AS DOUBLE) / COUNT(*) AS mean_late_ns,
       CAST(SUM(duration_ns) AS DOUBLE) / COUNT(*) AS mean_step_ns,
       CAST(SUM(duration_ns - waited_ns) AS DOUBLE) / COUNT(*) AS mean_own_ns,
       CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ns) AS BIGINT) AS p50_step_ns,
       MAX(duration_ns) AS max_step_ns,
       SUM(waited_ns) AS waited_total_ns
FROM steps
WHERE warmup = 0 OR {include_warmup} = 1
GROUP BY job, host, rank
ORDER BY made_others_wait_ns DESC NULLS LAST, mean_step_ns DESC, job, host, rank;

-- name: blame_by_wall
-- purpose: Who made others wait, how much, and which wall made them late.  For every rank with
-- purpose: late steps (late_ns > 0): the wait it caused, and per wall the excess of its time
-- purpose: over the step's median across all ranks (percentile_disc), summed over those steps;
-- purpose: blamed_wall is the wall with the largest excess.
WITH kept AS (
  SELECT * FROM steps WHERE warmup = 0 OR {include_warmup} = 1
),
step_median AS (
  SELECT job, step_index,
         CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wall_compute_ns) AS BIGINT) AS m_compute,
         CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wall_communication_ns) AS BIGINT)
           AS m_communication,
         CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wall_data_ns) AS BIGINT) AS m_data,
         CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wall_launch_ns) AS BIGINT) AS m_launch,
         CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wall_other_ns) AS BIGINT) AS m_other
  FROM kept
  GROUP BY job, step_index
),
blame AS (
  SELECT k.job AS job, k.host AS host, k.rank AS rank,
         COUNT(*) AS late_steps,
         SUM(k.late_ns) AS made_others_wait_ns,
         SUM(k.wall_compute_ns - m.m_compute) AS excess_compute_ns,
         SUM(k.wall_communication_ns - m.m_communication) AS excess_communication_ns,
         SUM(k.wall_data_ns - m.m_data) AS excess_data_ns,
         SUM(k.wall_launch_ns - m.m_launch) AS excess_launch_ns,
         SUM(k.wall_other_ns - m.m_other) AS excess_other_ns
  FROM kept k
  JOIN step_median m ON k.job = m.job AND k.step_index = m.step_index
  WHERE k.late_ns > 0
  GROUP BY k.job, k.host, k.rank
)
SELECT job, host, rank, late_steps, made_others_wait_ns,
       CASE GREATEST(excess_compute_ns, excess_communication_ns, excess_data_ns,
                     excess_launch_ns, excess_other_ns)
         WHEN excess_compute_ns THEN 'compute'
         WHEN excess_communication_ns THEN 'communication'
         WHEN excess_data_ns THEN 'data'
         WHEN excess_launch_ns THEN 'launch'
         ELSE 'other'
       END AS blamed_wall,
       excess_compute_ns, excess_communication_ns, excess_data_ns, excess_launch_ns,
       excess_other_ns
FROM blame
ORDER BY made_others_wait_ns DESC, job, host, rank;

-- name: collective_bandwidth
-- purpose: Bus bandwidth per collective type and message-size bucket (this rank's bytes):
-- purpose: instances (rows: one per rank and instance), p50 / p99 busbw_gbs, p50 transfer
-- purpose: time (last arrival to end) and p50 / p99 wait (own arrival to last arrival).
-- purpose: Rows without busbw_gbs (unknown size or times) are counted but not in the
-- purpose: bandwidth percentiles.
WITH sized AS (
  SELECT job, collective, busbw_gbs, transfer_ns, wait_ns,
         CASE WHEN bytes IS NULL THEN -1
              WHEN bytes < 1024 THEN 0
              WHEN bytes < 65536 THEN 1024
              WHEN bytes < 1048576 THEN 65536
              WHEN bytes < 16777216 THEN 1048576
              WHEN bytes < 268435456 THEN 16777216
              ELSE 268435456 END AS bucket_lo_bytes
  FROM collectives
)
SELECT job, collective, bucket_lo_bytes,
       CASE bucket_lo_bytes WHEN -1 THEN 'unknown'
                            WHEN 0 THEN '<1KiB'
                            WHEN 1024 THEN '1KiB-64KiB'
                            WHEN 65536 THEN '64KiB-1MiB'
                            WHEN 1048576 THEN '1MiB-16MiB'
                            WHEN 16777216 THEN '16MiB-256MiB'
                            ELSE '>=256MiB' END AS size_bucket,
       COUNT(*) AS instances,
       COUNT(busbw_gbs) AS with_busbw,
       CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY busbw_gbs) AS DOUBLE) AS p50_busbw_gbs,
       CAST(percentile_disc(0.99) WITHIN GROUP (ORDER BY busbw_gbs) AS DOUBLE) AS p99_busbw_gbs,
       CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY transfer_ns) AS BIGINT) AS p50_transfer_ns,
       CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY wait_ns) AS BIGINT) AS p50_wait_ns,
       CAST(percentile_disc(0.99) WITHIN GROUP (ORDER BY wait_ns) AS BIGINT) AS p99_wait_ns
FROM sized
GROUP BY job, collective, bucket_lo_bytes
ORDER BY job, collective, bucket_lo_bytes;

-- name: host_step_times
-- purpose: Step-time percentiles per host (every step row of every rank on the host): a slow
-- purpose: host (a bad node, a noisy neighbour) shows as higher percentiles than the others.
SELECT job, host,
       COUNT(DISTINCT rank) AS ranks,
       COUNT(*) AS step_rows,
       CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ns) AS BIGINT) AS p50_step_ns,
       CAST(percentile_disc(0.9) WITHIN GROUP (ORDER BY duration_ns) AS BIGINT) AS p90_step_ns,
       CAST(percentile_disc(0.99) WITHIN GROUP (ORDER BY duration_ns) AS BIGINT) AS p99_step_ns,
       MAX(duration_ns) AS max_step_ns,
       CAST(SUM(duration_ns) AS DOUBLE) / COUNT(*) AS mean_step_ns
FROM steps
WHERE warmup = 0 OR {include_warmup} = 1
GROUP BY job, host
ORDER BY job, p50_step_ns DESC, host;
