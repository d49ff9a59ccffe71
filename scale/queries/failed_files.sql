-- SPDX-License-Identifier: GPL-2.0-or-later
-- Files that were not fully analysed: unreadable, not a capture, crashed, timed out, or damaged
-- (read up to the damage; their commands up to it are in the datasets).
SELECT path, status, error, exit_code, day, size_bytes, packets, commands
FROM captures
WHERE status <> 'ok'
ORDER BY status, path;
