-- SPDX-License-Identifier: GPL-2.0-or-later
-- The 20 slowest LUN-days by p99 (fleet summary: per target, initiator, LUN and day).
SELECT day, target, initiator, lun, commands, never_answered, p50_ms, p99_ms, max_ms,
       excess_round_trips
FROM summary_luns
WHERE completed > 0
ORDER BY p99_ms DESC, day, target, initiator, lun
LIMIT 20;
