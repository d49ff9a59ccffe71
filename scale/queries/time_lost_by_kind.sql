-- SPDX-License-Identifier: GPL-2.0-or-later
-- Findings and time lost by kind per target: time lost counts each millisecond of a command's
-- latency once, to the cause that held it (docs/cli.md "Time lost"); touched sums the findings'
-- own lost_ms, which overlap.
SELECT target,
       kind,
       CAST(sum(findings) AS BIGINT) AS findings,
       CAST(sum(commands) AS BIGINT) AS commands,
       round(sum(time_lost_ms), 3) AS time_lost_ms,
       round(sum(touched_ms), 3)   AS touched_ms
FROM summary_kinds
GROUP BY target, kind
ORDER BY target, time_lost_ms DESC, findings DESC, kind;
