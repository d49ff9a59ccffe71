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
 * Optionally frames are dropped (-l N[:K][:MIN], direction b->a; -L the same for a->b): of
 * the IPv4 TCP frames that carry NEW data (sequence beyond the highest byte already forwarded
 * on that connection, so retransmissions are never counted or dropped) with at least MIN bytes
 * of TCP payload (default 1000), the K-th, K+N-th, K+2N-th ... (K defaults to N) are dropped:
 * the sender must retransmit.  Deterministic, so a workload of fixed-size reads loses the same
 * segment of the same commands on every run.
 *
 * Optionally the wire has jitter (-j MAX_US:PERCENT[:SEED]): PERCENT of the frames, picked by a
 * seeded generator (deterministic), are held up to MAX_US longer (uniform); frames keep their order
 * per direction, so the frames behind a late one wait for it, as behind a busy switch queue.
 * PERCENT 100 spreads every frame: each draws its own extra delay, uniform in [0, MAX_US]; a frame
 * never leaves before the one ahead of it, so within a back-to-back burst the extra delay is the
 * running maximum of the burst's draws (a spaced frame keeps its own draw).
 *
 * Optionally the wire has a shared queueing delay (-J MAX_US:STEP_US[:SEED]), as at a busy switch
 * port where consecutive frames wait behind the same cross traffic: per direction the extra delay
 * is a function of the time a frame reaches the wire, piecewise linear through knots STEP_US apart,
 * each knot drawn uniform in [0, MAX_US] by a seeded generator (one per direction).  Frames close
 * together see nearly the same extra delay (it changes by at most MAX_US/STEP_US per unit of time);
 * with STEP_US >= MAX_US it never falls faster than time passes, so order is kept without holding a
 * frame back.  The knots are drawn from the forwarder's start whether frames pass or not: for a seed
 * the delay is the same function of time on every run.  -j and -J add up.  The mid copy (-m) gets
 * half of a frame's extra delay, as if the queue were spread evenly along the wire.
 *
 * Optionally the TAPs carry offloaded frames (-o): opened with IFF_VNET_HDR and TUNSETOFFLOAD
 * (checksum, TSO4/6), each kernel hands its TAP TSO super-packets and gets GRO-sized ones, the
 * virtio header forwarded with each frame; tcpdump at either end then sees frames far above the
 * MTU, as on a host whose NIC does TSO/GRO.
 *
 * Timing: ppoll() with a nanosecond timeout on the earliest due frame,
 * CLOCK_MONOTONIC; frames keep their order per direction.  After a frame is
 * read the forwarder can keep polling without sleeping for a while (-s SPIN_US,
 * default 0 = off): with a pacing congestion control the sending kernel's TCP Small Queues hands the next skb
 * to the TAP only once the previous one was read, so a sleeping reader would pace a burst at its wake-up
 * latency instead of at the link rate.
 *
 * usage: delayfwd -a NS:TAP -b NS:TAP [-m NS:TAP] -d DELAY_US [-r MBIT]
 *                 [-M MTU] [-s SPIN_US] [-R RTPRIO] [-p PIDFILE] [-q]
 *                 [-l N[:K[:MIN]]] [-L N[:K[:MIN]]] [-j MAX_US:PERCENT[:SEED]]
 *                 [-J MAX_US:STEP_US[:SEED]] [-o]
 * Runs until SIGTERM/SIGINT; prints counters on exit.  SIGUSR1 prints them and starts them afresh
 * (the lab sends it when a capture joins a running session: the lateness that matters is the
 * captured traffic's, not the login's while the host was busy starting the peers).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MTU_MAX 9216
#define VNET_HDR 12 /* struct virtio_net_hdr_v1 (TUNSETVNETHDRSZ) */
#define GSO_MAX (65536 + 14 + VNET_HDR)

static unsigned slots = 8192; /* per direction; fewer with -o (frames up to 64 KiB) */
static size_t frame_max;      /* bytes of one slot: the MTU's frame, or a GSO super-packet */
static int offload;           /* -o: frames start with a virtio header */

struct frame {
  uint64_t due_ns; /* when it is written to the far side */
  uint64_t mid_ns; /* when the mid copy is written */
  int mid_done;
  uint32_t len;
  unsigned char* data;
};

struct jitter { /* -j: some frames held longer */
  unsigned long max_us, percent;
  uint64_t state; /* xorshift64 */
  unsigned long late;
};

struct queue_walk { /* -J: a queueing delay shared by consecutive frames */
  unsigned long max_us, step_us; /* step_us == 0: off */
  uint64_t state;                /* xorshift64 */
  uint64_t epoch_ns;             /* knot 0 */
  uint64_t k;                    /* the current segment runs from knot k-1 to knot k */
  uint64_t v0, v1;               /* extra delay at those knots, ns */
  uint64_t sum_ns, max_ns, n;    /* applied: for the exit counters */
};

static uint64_t next_rand(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* The shared queueing delay at time t (ns): linear between the knots around t. */
static uint64_t queue_delay(struct queue_walk* q, uint64_t t) {
  if (!q->step_us) return 0;
  const uint64_t step = (uint64_t)q->step_us * 1000ull;
  if (t < q->epoch_ns) t = q->epoch_ns;
  while (t >= q->epoch_ns + q->k * step) { /* knots are drawn in time order, also across idle time */
    q->v0 = q->v1;
    q->v1 = (next_rand(&q->state) % (q->max_us + 1)) * 1000ull;
    q->k++;
  }
  const uint64_t into = t - (q->epoch_ns + (q->k - 1) * step);
  const uint64_t d = q->v1 >= q->v0 ? q->v0 + (q->v1 - q->v0) * into / step : q->v0 - (q->v0 - q->v1) * into / step;
  q->sum_ns += d;
  q->n++;
  if (d > q->max_ns) q->max_ns = d;
  return d;
}

#define LOSS_FLOWS 64

struct loss_flow { /* highest sequence end forwarded on one TCP connection (one direction) */
  uint32_t saddr, daddr;
  uint16_t sport, dport;
  uint32_t high;
  int used;
};

struct loss {
  unsigned long every, first, min_payload; /* every == 0: off */
  unsigned long counted, dropped;
  struct loss_flow flows[LOSS_FLOWS];
  unsigned next_slot;
};

struct dir {
  const char* name;
  struct loss loss;
  struct jitter jitter;
  struct queue_walk queue;
  uint64_t last_due_ns; /* frames leave in order: never before the one ahead */
  int in_fd, out_fd;
  struct frame* q;
  unsigned head, tail;   /* head = oldest, tail = next free */
  unsigned mid_head;     /* oldest frame whose mid copy is pending */
  uint64_t wire_free_ns; /* serialisation: when the wire is free again */
  unsigned long frames, bytes, drops, late_us_max, late_1ms;
};

static volatile sig_atomic_t stop, restart_counters;
static void on_signal(int s) {
  if (s == SIGUSR1)
    restart_counters = 1;
  else
    stop = 1;
}

static void print_counters(const struct dir* d) {
  for (int i = 0; i < 2; i++)
    fprintf(stderr, "delayfwd: %s frames %lu bytes %lu drops %lu max-late %lu us late>1ms %lu\n", d[i].name,
            d[i].frames, d[i].bytes, d[i].drops, d[i].late_us_max, d[i].late_1ms);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int open_tap_in_ns(const char* spec, int mtu) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  char* colon = strchr(buf, ':');
  if (!colon) {
    fprintf(stderr, "delayfwd: bad spec %s (want NS:TAP)\n", spec);
    exit(2);
  }
  *colon = 0;
  const char *ns = buf, *tap = colon + 1;

  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  char path[512];
  snprintf(path, sizeof path, "/var/run/netns/%s", ns);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (self < 0 || nsfd < 0) {
    perror(path);
    exit(2);
  }
  if (setns(nsfd, CLONE_NEWNET) < 0) {
    perror("setns");
    exit(2);
  }

  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    perror("/dev/net/tun");
    exit(2);
  }
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    perror("TUNSETIFF");
    exit(2);
  }
  if (offload) {
    int hdr = VNET_HDR;
    if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0) {
      perror("TUNSETVNETHDRSZ");
      exit(2);
    }
    if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0) {
      perror("TUNSETOFFLOAD");
      exit(2);
    }
  }
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
  if (setns(self, CLONE_NEWNET) < 0) {
    perror("setns back");
    exit(2);
  }
  close(self);
  close(nsfd);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

static void usage(void) {
  fprintf(stderr,
          "usage: delayfwd -a NS:TAP -b NS:TAP [-m NS:TAP] -d DELAY_US [-r MBIT] [-M MTU] [-s SPIN_US] [-R "
          "RTPRIO] [-p PIDFILE] [-q] [-l N[:K[:MIN]]] [-L N[:K[:MIN]]] [-j MAX_US:PERCENT[:SEED]] "
          "[-J MAX_US:STEP_US[:SEED]] [-o]\n");
  exit(2);
}

static void parse_loss(struct loss* l, const char* arg) {
  unsigned long n = 0, k = 0, min = 1000;
  int got = sscanf(arg, "%lu:%lu:%lu", &n, &k, &min);
  if (got < 1 || n == 0) {
    fprintf(stderr, "delayfwd: bad loss spec %s (want N[:K[:MIN]])\n", arg);
    exit(2);
  }
  l->every = n;
  l->first = (got >= 2 && k > 0) ? k : n;
  l->min_payload = got >= 3 ? min : 1000;
}

static uint32_t be32(const unsigned char* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* 1 when this frame is to be dropped: an IPv4 TCP frame with new data, counted, its turn. */
static int loss_drop(struct loss* l, const unsigned char* f, size_t n) {
  if (offload) {
    if (n < VNET_HDR) return 0;
    f += VNET_HDR;
    n -= VNET_HDR;
  }
  if (!l->every || n < 14 + 20 + 20) return 0;
  if (f[12] != 0x08 || f[13] != 0x00) return 0; /* IPv4 only */
  const unsigned char* ip = f + 14;
  if ((ip[0] >> 4) != 4 || ip[9] != 6) return 0; /* TCP */
  size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
  size_t tot = ((size_t)ip[2] << 8) | ip[3];
  if (ihl < 20 || tot > n - 14 || tot < ihl + 20) return 0;
  const unsigned char* tcp = ip + ihl;
  size_t thl = (size_t)(tcp[12] >> 4) * 4;
  if (thl < 20 || tot < ihl + thl) return 0;
  size_t payload = tot - ihl - thl;
  uint32_t saddr = be32(ip + 12), daddr = be32(ip + 16);
  uint16_t sport = (uint16_t)((tcp[0] << 8) | tcp[1]), dport = (uint16_t)((tcp[2] << 8) | tcp[3]);
  uint32_t seq = be32(tcp + 4);
  int syn = tcp[13] & 0x02;
  struct loss_flow* fl = NULL;
  for (unsigned i = 0; i < LOSS_FLOWS; i++) {
    struct loss_flow* x = &l->flows[i];
    if (x->used && x->saddr == saddr && x->daddr == daddr && x->sport == sport && x->dport == dport) {
      fl = x;
      break;
    }
  }
  if (!fl || syn) { /* a new connection (or a reused 4-tuple): start from its SYN */
    if (!fl) {
      fl = &l->flows[l->next_slot++ % LOSS_FLOWS];
    }
    fl->used = 1;
    fl->saddr = saddr;
    fl->daddr = daddr;
    fl->sport = sport;
    fl->dport = dport;
    fl->high = seq + (syn ? 1u : 0u) + (uint32_t)payload;
    if (syn || payload == 0) return 0;
    /* first frame seen mid-connection: count it as new below */
    fl->high = seq;
  }
  uint32_t end = seq + (uint32_t)payload;
  if (payload == 0 || (int32_t)(end - fl->high) <= 0) return 0; /* no new byte: ACK or retransmission */
  fl->high = end;
  if (payload < l->min_payload) return 0;
  l->counted++;
  if (l->counted >= l->first && (l->counted - l->first) % l->every == 0) {
    l->dropped++;
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char *a = NULL, *b = NULL, *mid = NULL, *pidfile = NULL;
  long delay_us = -1, mbit = 1000, mtu = 1500, spin_us = 0, rtprio = 50;
  const char *loss_ba = NULL, *loss_ab = NULL;
  unsigned long jit_max = 0, jit_pct = 0, jit_seed = 1;
  unsigned long q_max = 0, q_step = 0, q_seed = 1;
  int quiet = 0, opt;
  while ((opt = getopt(argc, argv, "a:b:m:d:r:M:s:R:p:ql:L:j:J:o")) != -1) {
    switch (opt) {
      case 'a':
        a = optarg;
        break;
      case 'b':
        b = optarg;
        break;
      case 'm':
        mid = optarg;
        break;
      case 'd':
        delay_us = atol(optarg);
        break;
      case 'r':
        mbit = atol(optarg);
        break;
      case 'M':
        mtu = atol(optarg);
        break;
      case 's':
        spin_us = atol(optarg);
        break;
      case 'R':
        rtprio = atol(optarg);
        break;
      case 'p':
        pidfile = optarg;
        break;
      case 'q':
        quiet = 1;
        break;
      case 'l':
        loss_ba = optarg;
        break;
      case 'L':
        loss_ab = optarg;
        break;
      case 'j':
        if (sscanf(optarg, "%lu:%lu:%lu", &jit_max, &jit_pct, &jit_seed) < 2 || jit_pct > 100) {
          fprintf(stderr, "delayfwd: bad jitter spec %s (want MAX_US:PERCENT[:SEED])\n", optarg);
          return 2;
        }
        break;
      case 'J':
        if (sscanf(optarg, "%lu:%lu:%lu", &q_max, &q_step, &q_seed) < 2 || q_step == 0) {
          fprintf(stderr, "delayfwd: bad queue spec %s (want MAX_US:STEP_US[:SEED], STEP_US > 0)\n", optarg);
          return 2;
        }
        break;
      case 'o':
        offload = 1;
        break;
      default:
        usage();
    }
  }
  if (!a || !b || delay_us < 0) usage();
  if (mtu > MTU_MAX) {
    fprintf(stderr, "delayfwd: MTU at most %d\n", MTU_MAX);
    return 2;
  }
  frame_max = offload ? GSO_MAX : (size_t)mtu + 64;
  if (offload) slots = 2048;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (rtprio > 0) {
    struct sched_param sp = {.sched_priority = (int)rtprio};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) perror("delayfwd: SCHED_FIFO (continuing without)");
  }
  int fa = open_tap_in_ns(a, mtu), fb = open_tap_in_ns(b, mtu);
  int fm = mid ? open_tap_in_ns(mid, mtu) : -1;

  struct dir d[2] = {
      {.name = "a->b", .in_fd = fa, .out_fd = fb},
      {.name = "b->a", .in_fd = fb, .out_fd = fa},
  };
  for (int i = 0; i < 2; i++) {
    d[i].q = calloc(slots, sizeof(struct frame));
    unsigned char* pool = malloc((size_t)slots * frame_max);
    if (!d[i].q || !pool) {
      perror("calloc");
      return 1;
    }
    for (unsigned k = 0; k < slots; k++)
      d[i].q[k].data = pool + (size_t)k * frame_max;
    d[i].jitter.max_us = jit_max;
    d[i].jitter.percent = jit_pct;
    d[i].jitter.state = 0x9E3779B97F4A7C15ull ^ ((uint64_t)jit_seed * 2654435761ull + (uint64_t)i);
    d[i].queue.max_us = q_max;
    d[i].queue.step_us = q_step;
    /* a different stream from -j's for the same seed */
    d[i].queue.state = 0xD1B54A32D192ED03ull ^ ((uint64_t)q_seed * 0x9E3779B97F4A7C15ull + (uint64_t)(i + 1));
    for (int w = 0; w < 8; w++) next_rand(&d[i].queue.state);
    d[i].queue.v1 = (next_rand(&d[i].queue.state) % (q_max + 1)) * 1000ull; /* knot 0 */
  }
  if (loss_ab) parse_loss(&d[0].loss, loss_ab);
  if (loss_ba) parse_loss(&d[1].loss, loss_ba);
  mlockall(MCL_CURRENT); /* queues allocated above: no page faults on the hot path */
  if (pidfile) {
    FILE* f = fopen(pidfile, "w");
    if (f) {
      fprintf(f, "%d\n", getpid());
      fclose(f);
    }
  }
  if (!quiet)
    fprintf(stderr, "delayfwd: %s <-> %s%s%s, %ld us one way, %ld Mbit/s%s\n", a, b, mid ? " mid " : "",
            mid ? mid : "", delay_us, mbit, offload ? ", offload (TSO/GRO frames)" : "");
  if (!quiet && jit_pct)
    fprintf(stderr, "delayfwd: jitter: %lu%% of frames up to %lu us late (seed %lu), order kept\n", jit_pct,
            jit_max, jit_seed);
  for (int i = 0; i < 2; i++)
    if (!quiet && d[i].loss.every)
      fprintf(stderr,
              "delayfwd: %s drops new-data frames with >= %lu payload bytes number %lu, %lu, %lu, ...\n",
              d[i].name, d[i].loss.min_payload, d[i].loss.first, d[i].loss.first + d[i].loss.every,
              d[i].loss.first + 2 * d[i].loss.every);

  if (!quiet && q_step)
    fprintf(stderr, "delayfwd: queue: shared extra delay up to %lu us, a knot every %lu us (seed %lu), order kept\n",
            q_max, q_step, q_seed);
  const uint64_t delay_ns = (uint64_t)delay_us * 1000ull;
  const uint64_t epoch = now_ns();
  for (int i = 0; i < 2; i++) d[i].queue.epoch_ns = epoch;
  uint64_t last_rx_ns = 0;
  while (!stop) {
    if (restart_counters) {
      restart_counters = 0;
      if (!quiet) {
        fprintf(stderr, "delayfwd: counters so far (restarted now):\n");
        print_counters(d);
      }
      for (int i = 0; i < 2; i++) d[i].frames = d[i].bytes = d[i].drops = d[i].late_us_max = d[i].late_1ms = 0;
    }
    uint64_t now = now_ns();
    /* 1. emit everything that is due (mid copies first: they are earlier) */
    for (int i = 0; i < 2; i++) {
      struct dir* x = &d[i];
      while (fm >= 0 && x->mid_head != x->tail && x->q[x->mid_head % slots].mid_ns <= now) {
        struct frame* f = &x->q[x->mid_head % slots];
        if (write(fm, f->data, f->len) < 0 && errno != EAGAIN && errno != EIO) perror("write mid");
        f->mid_done = 1;
        x->mid_head++;
      }
      while (x->head != x->tail && x->q[x->head % slots].due_ns <= now) {
        struct frame* f = &x->q[x->head % slots];
        if (fm >= 0 && !f->mid_done) { /* never skip the mid copy */
          if (write(fm, f->data, f->len) < 0 && errno != EAGAIN) perror("write mid");
          f->mid_done = 1;
          x->mid_head = x->head + 1;
        }
        uint64_t late = (now - f->due_ns) / 1000;
        if (late > x->late_us_max) x->late_us_max = late;
        x->late_1ms += late > 1000;
        ssize_t w = write(x->out_fd, f->data, f->len);
        if (w < 0 && errno != EAGAIN && errno != EIO) perror("write");
        x->head++;
      }
    }
    /* 2. wait for input or the next due time */
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < 2; i++) {
      struct dir* x = &d[i];
      if (x->head != x->tail && x->q[x->head % slots].due_ns < next) next = x->q[x->head % slots].due_ns;
      if (fm >= 0 && x->mid_head != x->tail && x->q[x->mid_head % slots].mid_ns < next)
        next = x->q[x->mid_head % slots].mid_ns;
    }
    struct pollfd p[2] = {{fa, POLLIN, 0}, {fb, POLLIN, 0}};
    struct timespec ts, *tsp = NULL;
    uint64_t n2 = now_ns();
    if (next != UINT64_MAX) {
      uint64_t w = next > n2 ? next - n2 : 0;
      ts.tv_sec = w / 1000000000ull;
      ts.tv_nsec = w % 1000000000ull;
      tsp = &ts;
    }
    if (n2 - last_rx_ns < (uint64_t)spin_us * 1000ull) { /* busy: poll without sleeping */
      ts.tv_sec = 0;
      ts.tv_nsec = 0;
      tsp = &ts;
    }
    int r = ppoll(p, 2, tsp, NULL);
    if (r < 0) {
      if (errno == EINTR) continue;
      perror("ppoll");
      break;
    }
    /* 3. read all pending frames */
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & POLLIN)) continue;
      struct dir* x = &d[i];
      for (;;) {
        struct frame* f = &x->q[x->tail % slots];
        static unsigned char scratch[GSO_MAX];
        int full = (x->tail - x->head) >= slots;
        ssize_t n = read(x->in_fd, full ? scratch : f->data, frame_max);
        if (n <= 0) break;
        if (full) {
          x->drops++;
          continue;
        }
        if (loss_drop(&x->loss, f->data, (size_t)n)) continue; /* lost on the wire */
        uint64_t t = now_ns();
        uint64_t start = t;
        last_rx_ns = t;
        if (mbit > 0) {
          /* Ethernet: preamble+SFD 8, FCS 4, inter-frame gap 12 */
          uint64_t ser = ((uint64_t)(n + 24) * 8ull * 1000ull) / (uint64_t)mbit;
          if (offload && n > (ssize_t)mtu + 14 + VNET_HDR) /* a super-packet: one preamble/gap per wire frame */
            ser += (uint64_t)((n - 14 - VNET_HDR) / mtu) * 24ull * 8ull * 1000ull / (uint64_t)mbit;
          if (x->wire_free_ns > start) start = x->wire_free_ns;
          x->wire_free_ns = start + ser;
          start += ser;
        }
        uint64_t extra_ns = 0;
        if (x->jitter.percent && next_rand(&x->jitter.state) % 100 < x->jitter.percent) {
          extra_ns = (next_rand(&x->jitter.state) % (x->jitter.max_us + 1)) * 1000ull;
          x->jitter.late++;
        }
        extra_ns += queue_delay(&x->queue, start);
        f->len = (uint32_t)n;
        f->due_ns = start + delay_ns + extra_ns;
        if (f->due_ns < x->last_due_ns) f->due_ns = x->last_due_ns; /* in order behind a late frame */
        x->last_due_ns = f->due_ns;
        f->mid_ns = start + delay_ns / 2 + extra_ns / 2;
        f->mid_done = 0;
        x->tail++;
        x->frames++;
        x->bytes += n;
      }
    }
  }
  if (!quiet) print_counters(d);
  if (!quiet)
    for (int i = 0; i < 2; i++)
      if (d[i].loss.every)
        fprintf(stderr, "delayfwd: %s loss: counted %lu new-data frames, dropped %lu\n", d[i].name,
                d[i].loss.counted, d[i].loss.dropped);
  if (!quiet && jit_pct)
    for (int i = 0; i < 2; i++)
      fprintf(stderr, "delayfwd: %s jitter: %lu frames held longer\n", d[i].name, d[i].jitter.late);
  if (!quiet && q_step)
    for (int i = 0; i < 2; i++)
      fprintf(stderr, "delayfwd: %s queue: mean %lu us max %lu us over %lu frames\n", d[i].name,
              (unsigned long)(d[i].queue.n ? d[i].queue.sum_ns / d[i].queue.n / 1000 : 0),
              (unsigned long)(d[i].queue.max_ns / 1000), (unsigned long)d[i].queue.n);
  if (pidfile) unlink(pidfile);
  return 0;
}
