-- SPDX-License-Identifier: GPL-2.0-or-later
-- Which targets showed Nagle holds this week: the 7 days (UTC) ending on `until`
-- (--set until=2026-11-25; default today), busiest first.
SELECT target,
       max(target_name)            AS target_name,
       CAST(sum(findings) AS BIGINT) AS nagle_holds,
       CAST(sum(commands) AS BIGINT) AS commands_held,
       round(sum(time_lost_ms), 3) AS time_lost_ms,
       count(DISTINCT initiator)   AS initiators,
       min(day)                    AS first_day,
       max(day)                    AS last_day
FROM summary_kinds
WHERE kind = 'nagle_hold' AND findings > 0
  AND day >  coalesce(CAST(getvariable('until') AS DATE), current_date) - 7
  AND day <= coalesce(CAST(getvariable('until') AS DATE), current_date)
GROUP BY target
ORDER BY nagle_holds DESC, target;
