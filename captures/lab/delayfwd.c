// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * delayfwd — a one-wire "WAN emulator" for the iscsi-doctor capture lab.
 *
 * The kernel on the lab machines has no sch_netem, so the delay lives here:
 * delayfwd opens one TAP device inside each of two network namespaces
 * (setns + TUNSETIFF, so each namespace sees an ordinary Ethernet interface)
 * and copies every Ethernet frame from one TAP to the other after a fixed
 * one-way delay.  TCP stays end to end between the two real kernels.
 *
 * Optionally a third TAP in a third namespace ("mid") receives a copy of
 * every frame at half the delay: tcpdump on that interface sees the traffic
 * as a passive tap halfway along the wire would.
 *
 * The forwarder runs with SCHED_FIFO priority (-R, default 50; 0 = leave the
 * normal scheduler) and a 1 us timer slack: on a busy 2-core machine a normal
 * process is sometimes woken milliseconds late, which would add jitter to the
 * emulated wire.  It sleeps almost all the time, so it cannot starve the peers.
 *
 * Optionally frames are serialised at a link rate (default 1000 Mbit/s, as
 * in the study's Gigabit Ethernet), so a burst leaves the wire at line rate.
 *
 * Timing: ppoll() with a nanosecond timeout on the earliest due frame,
 * CLOCK_MONOTONIC; frames keep their order per direction.  After a frame is
 * read the forwarder can keep polling without sleeping for a while (-s SPIN_US,
 * default 0 = off): with a pacing congestion control the sending kernel's TCP Small Queues hands the next skb to
 * the TAP only once the previous one was read, so a sleeping reader would
 * pace a burst at its wake-up latency instead of at the link rate.
 *
 * usage: delayfwd -a NS:TAP -b NS:TAP [-m NS:TAP] -d DELAY_US [-r MBIT]
 *                 [-M MTU] [-s SPIN_US] [-R RTPRIO] [-p PIDFILE] [-q]
 * Runs until SIGTERM/SIGINT; prints counters on exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 8192
#define FRAME_MAX 2048   /* MTU up to 2000 */

struct frame {
    uint64_t due_ns;   /* when it is written to the far side */
    uint64_t mid_ns;   /* when the mid copy is written */
    int mid_done;
    uint16_t len;
    unsigned char data[FRAME_MAX];
};

struct dir {
    const char *name;
    int in_fd, out_fd;
    struct frame *q;
    unsigned head, tail;      /* head = oldest, tail = next free */
    unsigned mid_head;        /* oldest frame whose mid copy is pending */
    uint64_t wire_free_ns;    /* serialisation: when the wire is free again */
    unsigned long frames, bytes, drops, late_us_max;
};

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int open_tap_in_ns(const char *spec, int mtu)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strchr(buf, ':');
    if (!colon) { fprintf(stderr, "delayfwd: bad spec %s (want NS:TAP)\n", spec); exit(2); }
    *colon = 0;
    const char *ns = buf, *tap = colon + 1;

    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    char path[512];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (self < 0 || nsfd < 0) { perror(path); exit(2); }
    if (setns(nsfd, CLONE_NEWNET) < 0) { perror("setns"); exit(2); }

    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) { perror("/dev/net/tun"); exit(2); }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) { perror("TUNSETIFF"); exit(2); }
    /* MTU via a throwaway socket in the namespace */
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s >= 0) {
        struct ifreq m;
        memset(&m, 0, sizeof m);
        snprintf(m.ifr_name, IFNAMSIZ, "%s", tap);
        m.ifr_mtu = mtu;
        if (ioctl(s, SIOCSIFMTU, &m) < 0) perror("SIOCSIFMTU");
        close(s);
    }
    if (setns(self, CLONE_NEWNET) < 0) { perror("setns back"); exit(2); }
    close(self);
    close(nsfd);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static void usage(void)
{
    fprintf(stderr, "usage: delayfwd -a NS:TAP -b NS:TAP [-m NS:TAP] -d DELAY_US [-r MBIT] [-M MTU] [-s SPIN_US] [-R RTPRIO] [-p PIDFILE] [-q]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *a = NULL, *b = NULL, *mid = NULL, *pidfile = NULL;
    long delay_us = -1, mbit = 1000, mtu = 1500, spin_us = 0, rtprio = 50;
    int quiet = 0, opt;
    while ((opt = getopt(argc, argv, "a:b:m:d:r:M:s:R:p:q")) != -1) {
        switch (opt) {
        case 'a': a = optarg; break;
        case 'b': b = optarg; break;
        case 'm': mid = optarg; break;
        case 'd': delay_us = atol(optarg); break;
        case 'r': mbit = atol(optarg); break;
        case 'M': mtu = atol(optarg); break;
        case 's': spin_us = atol(optarg); break;
        case 'R': rtprio = atol(optarg); break;
        case 'p': pidfile = optarg; break;
        case 'q': quiet = 1; break;
        default: usage();
        }
    }
    if (!a || !b || delay_us < 0) usage();
    if (mtu > FRAME_MAX - 48) { fprintf(stderr, "delayfwd: MTU at most %d\n", FRAME_MAX - 48); return 2; }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (rtprio > 0) {
        struct sched_param sp = { .sched_priority = (int)rtprio };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) perror("delayfwd: SCHED_FIFO (continuing without)");
    }
    int fa = open_tap_in_ns(a, mtu), fb = open_tap_in_ns(b, mtu);
    int fm = mid ? open_tap_in_ns(mid, mtu) : -1;

    struct dir d[2] = {
        { .name = "a->b", .in_fd = fa, .out_fd = fb },
        { .name = "b->a", .in_fd = fb, .out_fd = fa },
    };
    for (int i = 0; i < 2; i++) {
        d[i].q = calloc(SLOTS, sizeof(struct frame));
        if (!d[i].q) { perror("calloc"); return 1; }
    }
    mlockall(MCL_CURRENT);   /* queues allocated above: no page faults on the hot path */
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f) { fprintf(f, "%d\n", getpid()); fclose(f); }
    }
    if (!quiet) fprintf(stderr, "delayfwd: %s <-> %s%s%s, %ld us one way, %ld Mbit/s\n",
                        a, b, mid ? " mid " : "", mid ? mid : "", delay_us, mbit);

    const uint64_t delay_ns = (uint64_t)delay_us * 1000ull;
    uint64_t last_rx_ns = 0;
    while (!stop) {
        uint64_t now = now_ns();
        /* 1. emit everything that is due (mid copies first: they are earlier) */
        for (int i = 0; i < 2; i++) {
            struct dir *x = &d[i];
            while (fm >= 0 && x->mid_head != x->tail && x->q[x->mid_head % SLOTS].mid_ns <= now) {
                struct frame *f = &x->q[x->mid_head % SLOTS];
                if (write(fm, f->data, f->len) < 0 && errno != EAGAIN && errno != EIO) perror("write mid");
                f->mid_done = 1;
                x->mid_head++;
            }
            while (x->head != x->tail && x->q[x->head % SLOTS].due_ns <= now) {
                struct frame *f = &x->q[x->head % SLOTS];
                if (fm >= 0 && !f->mid_done) { /* never skip the mid copy */
                    if (write(fm, f->data, f->len) < 0 && errno != EAGAIN) perror("write mid");
                    f->mid_done = 1;
                    x->mid_head = x->head + 1;
                }
                uint64_t late = (now - f->due_ns) / 1000;
                if (late > x->late_us_max) x->late_us_max = late;
                ssize_t w = write(x->out_fd, f->data, f->len);
                if (w < 0 && errno != EAGAIN && errno != EIO) perror("write");
                x->head++;
            }
        }
        /* 2. wait for input or the next due time */
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < 2; i++) {
            struct dir *x = &d[i];
            if (x->head != x->tail && x->q[x->head % SLOTS].due_ns < next) next = x->q[x->head % SLOTS].due_ns;
            if (fm >= 0 && x->mid_head != x->tail && x->q[x->mid_head % SLOTS].mid_ns < next)
                next = x->q[x->mid_head % SLOTS].mid_ns;
        }
        struct pollfd p[2] = { { fa, POLLIN, 0 }, { fb, POLLIN, 0 } };
        struct timespec ts, *tsp = NULL;
        uint64_t n2 = now_ns();
        if (next != UINT64_MAX) {
            uint64_t w = next > n2 ? next - n2 : 0;
            ts.tv_sec = w / 1000000000ull;
            ts.tv_nsec = w % 1000000000ull;
            tsp = &ts;
        }
        if (n2 - last_rx_ns < (uint64_t)spin_us * 1000ull) {   /* busy: poll without sleeping */
            ts.tv_sec = 0;
            ts.tv_nsec = 0;
            tsp = &ts;
        }
        int r = ppoll(p, 2, tsp, NULL);
        if (r < 0) { if (errno == EINTR) continue; perror("ppoll"); break; }
        /* 3. read all pending frames */
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & POLLIN)) continue;
            struct dir *x = &d[i];
            for (;;) {
                struct frame *f = &x->q[x->tail % SLOTS];
                unsigned char scratch[FRAME_MAX];
                int full = (x->tail - x->head) >= SLOTS;
                ssize_t n = read(x->in_fd, full ? scratch : f->data, FRAME_MAX);
                if (n <= 0) break;
                if (full) { x->drops++; continue; }
                uint64_t t = now_ns();
                uint64_t start = t;
                last_rx_ns = t;
                if (mbit > 0) {
                    /* Ethernet: preamble+SFD 8, FCS 4, inter-frame gap 12 */
                    uint64_t ser = ((uint64_t)(n + 24) * 8ull * 1000ull) / (uint64_t)mbit;
                    if (x->wire_free_ns > start) start = x->wire_free_ns;
                    x->wire_free_ns = start + ser;
                    start += ser;
                }
                f->len = (uint16_t)n;
                f->due_ns = start + delay_ns;
                f->mid_ns = start + delay_ns / 2;
                f->mid_done = 0;
                x->tail++;
                x->frames++;
                x->bytes += n;
            }
        }
    }
    if (!quiet)
        for (int i = 0; i < 2; i++)
            fprintf(stderr, "delayfwd: %s frames %lu bytes %lu drops %lu max-late %lu us\n",
                    d[i].name, d[i].frames, d[i].bytes, d[i].drops, d[i].late_us_max);
    if (pidfile) unlink(pidfile);
    return 0;
}
