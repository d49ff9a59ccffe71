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
 *   ISD_TCP_CC_AT_LISTEN=1  also set ISD_TCP_CC on a TCP socket when it starts to
 *                      listen, so that the connections it accepts start with it.
 *                      Without this a target's connection is set up with the
 *                      namespace default (bbr here) and only switched at its
 *                      TCP_NODELAY call; bbr's init turns on TCP's internal pacing
 *                      for the socket, and the switch to cubic leaves it on.
 *                      (The initiators set TCP_NODELAY before connect(): not affected.)
 *   ISD_RCVBUF=BYTES   connect() of a TCP socket first sets SO_RCVBUF=BYTES on it (the
 *                      kernel doubles it for overhead and turns receive-buffer
 *                      autotuning off): a small, fixed receive window on the
 *                      connecting side (the initiator), set before the SYN so the
 *                      window scale is chosen for it.
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

typedef int (*setsockopt_fn)(int, int, int, const void*, socklen_t);
typedef int (*connect_fn)(int, const struct sockaddr*, socklen_t);
typedef int (*listen_fn)(int, int);

int listen(int fd, int backlog) {
  static listen_fn real_listen;
  if (!real_listen) real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
  const char* cc = getenv("ISD_TCP_CC");
  const char* early = getenv("ISD_TCP_CC_AT_LISTEN");
  int type = 0;
  socklen_t tl = sizeof type;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (cc && *cc && early && *early == '1' && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
      type == SOCK_STREAM && getsockname(fd, (struct sockaddr*)&ss, &sl) == 0 &&
      (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
    static setsockopt_fn real_set;
    if (!real_set) real_set = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    int r = real_set(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
    if (getenv("NODELAY_SHIM_LOG"))
      fprintf(stderr, "nodelay_shim[%d]: listening fd %d congestion control %s: %s\n", (int)getpid(), fd, cc,
              r == 0 ? "ok" : "FAILED");
  }
  return real_listen(fd, backlog);
}

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  static connect_fn real_connect;
  if (!real_connect) real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
  const char* rcvbuf = getenv("ISD_RCVBUF");
  int type = 0;
  socklen_t tl = sizeof type;
  if (rcvbuf && *rcvbuf && addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6) &&
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
    int val = atoi(rcvbuf);
    static setsockopt_fn real_set;
    if (!real_set) real_set = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    int r = real_set(fd, SOL_SOCKET, SO_RCVBUF, &val, sizeof val);
    if (getenv("NODELAY_SHIM_LOG")) {
      int got = 0;
      socklen_t gl = sizeof got;
      getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &gl);
      fprintf(stderr, "nodelay_shim[%d]: fd %d SO_RCVBUF=%d before connect: %s (kernel reports %d)\n",
              (int)getpid(), fd, val, r == 0 ? "ok" : "FAILED", got);
    }
  }
  return real_connect(fd, addr, len);
}

int setsockopt(int fd, int level, int optname, const void* optval, socklen_t optlen) {
  static setsockopt_fn real;
  if (!real) real = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
  if (level == IPPROTO_TCP && optname == TCP_NODELAY) {
    const char* cc = getenv("ISD_TCP_CC");
    const char* nagle = getenv("ISD_NAGLE_ON");
    int log = getenv("NODELAY_SHIM_LOG") != NULL;
    int val = optval && optlen >= (socklen_t)sizeof(int) ? *(const int*)optval : -1;
    if (cc && *cc) {
      int r = real(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
      if (log)
        fprintf(stderr, "nodelay_shim[%d]: fd %d congestion control %s: %s\n", (int)getpid(), fd, cc,
                r == 0 ? "ok" : "FAILED");
    }
    if (nagle && *nagle == '1') {
      if (log)
        fprintf(stderr, "nodelay_shim[%d]: ignored TCP_NODELAY=%d on fd %d (Nagle stays on)\n", (int)getpid(),
                val, fd);
      return 0;
    }
    if (log)
      fprintf(stderr, "nodelay_shim[%d]: TCP_NODELAY=%d on fd %d passed through\n", (int)getpid(), val, fd);
  }
  return real(fd, level, optname, optval, optlen);
}
