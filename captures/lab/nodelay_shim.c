// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nodelay_shim — LD_PRELOAD library for the iscsi-doctor capture lab.
 *
 * tgtd and libiscsi both set TCP_NODELAY on their iSCSI socket and have no option
 * to leave it off.  This library intercepts setsockopt(IPPROTO_TCP, TCP_NODELAY):
 *
 *   ISD_NAGLE_ON=1     the call becomes a successful no-op: the socket keeps the
 *                      kernel default, Nagle's algorithm on.
 *   ISD_TCP_CC=NAME    the socket's congestion control is set to NAME (e.g. cubic)
 *                      with TCP_CONGESTION at that moment.  Some hosts default to
 *                      bbr, whose pacing spreads every burst, and a non-initial
 *                      network namespace may not select cubic as its default; a
 *                      per-socket choice by a privileged process is allowed.
 *   NODELAY_SHIM_LOG=1 log each intercepted call on stderr.
 *
 * Everything else (TCP_CORK included) is passed through untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

int setsockopt(int fd, int level, int optname, const void *optval, socklen_t optlen)
{
    static setsockopt_fn real;
    if (!real) real = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    if (level == IPPROTO_TCP && optname == TCP_NODELAY) {
        const char *cc = getenv("ISD_TCP_CC");
        const char *nagle = getenv("ISD_NAGLE_ON");
        int log = getenv("NODELAY_SHIM_LOG") != NULL;
        int val = optval && optlen >= (socklen_t)sizeof(int) ? *(const int *)optval : -1;
        if (cc && *cc) {
            int r = real(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
            if (log) fprintf(stderr, "nodelay_shim[%d]: fd %d congestion control %s: %s\n", (int)getpid(), fd, cc,
                             r == 0 ? "ok" : "FAILED");
        }
        if (nagle && *nagle == '1') {
            if (log) fprintf(stderr, "nodelay_shim[%d]: ignored TCP_NODELAY=%d on fd %d (Nagle stays on)\n",
                             (int)getpid(), val, fd);
            return 0;
        }
        if (log) fprintf(stderr, "nodelay_shim[%d]: TCP_NODELAY=%d on fd %d passed through\n", (int)getpid(), val, fd);
    }
    return real(fd, level, optname, optval, optlen);
}
