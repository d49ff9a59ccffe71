# SPDX-License-Identifier: GPL-2.0-or-later
"""peak_rss.py OUT CMD...: runs CMD, writes its peak RSS in KiB to OUT, exits with its code.

A child's ru_maxrss starts from the resident size of the process it was forked from (Linux keeps
the old image's high-water mark across exec), so measuring from a test process that has just made a
large capture in memory would report that process. This small process forks CMD instead."""
import os
import sys

pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
