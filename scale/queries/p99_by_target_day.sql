-- SPDX-License-Identifier: GPL-2.0-or-later
-- Latency p50/p99 of the completed SCSI commands per target and day, over every initiator and LUN.
-- Ranked as the CLI ranks (the value at floor(q * (n - 1) + 0.5) of the sorted latencies), so a
-- single capture's figures equal its report's.
SELECT target,
       day,
       count(*)                                                                    AS commands,
       list_sort(list(latency_ms))[CAST(floor(0.50 * (count(*) - 1) + 0.5) AS BIGINT) + 1] AS p50_ms,
       list_sort(list(latency_ms))[CAST(floor(0.99 * (count(*) - 1) + 0.5) AS BIGINT) + 1] AS p99_ms,
       max(latency_ms)                                                             AS max_ms,
       CAST(sum(excess_round_trips) AS BIGINT)                                     AS excess_round_trips
FROM commands
WHERE completed AND iscsi_opcode = 1
GROUP BY target, day
ORDER BY target, day;
