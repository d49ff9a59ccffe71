// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor probe iscsi://HOST[:PORT]/IQN/LUN`: an active check of a target for CI. It logs in
// with libiscsi, runs a fixed battery (QD1 READs of 512 B to 1 MiB, then 4 KiB at QD 2 and 8; the
// same WRITEs with --allow-write, inside --lba-range only) while capturing its own connection with
// libpcap from before the SYN (so MSS, window scale and the login's keys are measured, not
// inferred), then reports on that capture exactly as for a file: every report and gate option of
// the plain command applies (docs/cli.md "probe").
#include "commands/probe.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pcap/pcap.h>
#include <CLI/CLI.hpp>

#include "iscsi_doctor/scsi.hpp"
#include "options.hpp"
#include "commands/analyse.hpp"
#include "commands/report_command.hpp"
#include "input/optional_module.hpp"

// Last: see libiscsi.hpp.
#include "commands/libiscsi.hpp"

namespace iscsi_doctor::cli {

const Libiscsi* libiscsi(std::string& why) {
  const auto entry = optional_module_entry<const Libiscsi* (*)()>("libiscsi", ISCSI_DOCTOR_LIBISCSI_MODULE, why);
  return entry ? entry() : nullptr;
}

namespace {

constexpr const char* kDefaultInitiator = "iqn.2026-11.org.iscsi-doctor:probe";

// libiscsi, loaded by run_probe before any call.
const Libiscsi* g_libiscsi = nullptr;
const Libiscsi& L() { return *g_libiscsi; }

struct Step {
  bool write;
  uint32_t bytes;
  int queue_depth;
  int commands;
};

std::string step_name(const Step& s) {
  return fmt::format("{} {} QD{}", s.write ? "WRITE" : "READ",
                     s.bytes >= 1048576 ? "1 MiB"
                     : s.bytes >= 1024  ? fmt::format("{} KiB", s.bytes / 1024)
                                        : fmt::format("{} B", s.bytes),
                     s.queue_depth);
}

// The battery: QD1 at each size, then 4 KiB at QD 2 and 8 (where a target's Nagle shows: the second
// PDU of a back-to-back pair waits for the initiator's ACK).
std::vector<Step> battery(bool write, int count) {
  std::vector<Step> out;
  for (uint32_t b : {512u, 4096u, 8192u, 65536u, 1048576u})
    out.push_back({write, b, 1, b == 1048576u ? std::max(2, count / 4) : count});
  for (int qd : {2, 8})
    out.push_back({write, 4096, qd, count * qd});
  return out;
}

// host and port of a libiscsi portal string: HOST, HOST:PORT, [V6] or [V6]:PORT.
bool split_portal(const std::string& portal, std::string& host, std::string& port) {
  port = "3260";
  if (!portal.empty() && portal[0] == '[') {
    const auto close = portal.find(']');
    if (close == std::string::npos) return false;
    host = portal.substr(1, close - 1);
    if (close + 1 < portal.size() && portal[close + 1] == ':') port = portal.substr(close + 2);
  } else {
    const auto colon = portal.rfind(':');
    host = portal.substr(0, colon);
    if (colon != std::string::npos) port = portal.substr(colon + 1);
  }
  return !host.empty() && !port.empty();
}

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* a = sa->sa_family == AF_INET6
                      ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr)
                      : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
  inet_ntop(sa->sa_family, a, buf, sizeof buf);
  return buf;
}

uint16_t port_of(const sockaddr* sa) {
  return ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                         : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
}

// libpcap on the probe's own traffic, written to a pcap file as it comes.
class Capture {
public:
  ~Capture() { close(); }
  std::string open(const std::string& iface, const std::string& filter, const std::string& path) {
    char err[PCAP_ERRBUF_SIZE] = {};
    p_ = pcap_create(iface.c_str(), err);
    if (!p_) return err;
    // Not immediate mode: on Linux that rings fixed snaplen-sized frames, 256 of them in 64 MiB,
    // fewer than one 1 MiB read's segments; blocks of packets every 10 ms keep up.
    if (pcap_set_snaplen(p_, 262144) != 0 || pcap_set_timeout(p_, 10) != 0 ||
        pcap_set_buffer_size(p_, 64 << 20) != 0)
      return "cannot configure the capture";
    if (pcap_set_tstamp_precision(p_, PCAP_TSTAMP_PRECISION_NANO) != 0) {
      // not offered by this device: microseconds, which pcap_dump writes as such
    }
    const int rc = pcap_activate(p_);
    if (rc < 0) return fmt::format("{}: {}", pcap_statustostr(rc), pcap_geterr(p_));
    if (auto e = set_filter(filter); !e.empty()) return e;
    if (pcap_setnonblock(p_, 1, err) != 0) return err;
    fd_ = pcap_get_selectable_fd(p_);
    dump_ = pcap_dump_open(p_, path.c_str());
    if (!dump_) return pcap_geterr(p_);
    return {};
  }
  std::string set_filter(const std::string& filter) {
    bpf_program prog{};
    if (pcap_compile(p_, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 ||
        pcap_setfilter(p_, &prog) != 0) {
      pcap_freecode(&prog);
      return fmt::format("capture filter '{}': {}", filter, pcap_geterr(p_));
    }
    pcap_freecode(&prog);
    return {};
  }
  int fd() const { return fd_; }
  void drain() {
    if (!p_) return;
    while (pcap_dispatch(p_, -1, pcap_dump, reinterpret_cast<u_char*>(dump_)) > 0) {
    }
  }
  // Keeps what comes for ms more (the logout, the FINs), then says how many were dropped.
  unsigned finish(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      pollfd pf{fd_, POLLIN, 0};
      poll(&pf, 1, 10);
      drain();
    }
    pcap_stat st{};
    const unsigned dropped = pcap_stats(p_, &st) == 0 ? st.ps_drop + st.ps_ifdrop : 0;
    close();
    return dropped;
  }
  void close() {
    if (dump_) pcap_dump_close(dump_);
    if (p_) pcap_close(p_);
    dump_ = nullptr;
    p_ = nullptr;
  }

private:
  pcap_t* p_ = nullptr;
  pcap_dumper_t* dump_ = nullptr;
  int fd_ = -1;
};

struct Run {
  iscsi_context* iscsi = nullptr;
  Capture* cap = nullptr;
  int in_flight = 0, failed = 0;
  std::string first_error;
};

// libiscsi keeps ASC and ASCQ in one number (ASC << 8 | ASCQ); named as the reports name them.
std::string scsi_asc_words(int ascq) {
  const uint8_t asc = uint8_t(ascq >> 8), q = uint8_t(ascq);
  const std::string_view name = scsi::asc_name(asc, q);
  return name.empty() ? fmt::format("ASC 0x{:02x} ASCQ 0x{:02x}", asc, q) : std::string(name);
}

void completed(iscsi_context* iscsi, int status, void* command_data, void* private_data) {
  auto* run = static_cast<Run*>(private_data);
  auto* task = static_cast<scsi_task*>(command_data);
  --run->in_flight;
  if (status != SCSI_STATUS_GOOD && run->failed++ == 0) {
    run->first_error = L().iscsi_get_error(iscsi);
    if (task && task->status == SCSI_STATUS_CHECK_CONDITION)
      run->first_error = fmt::format("{}, {} ({})", scsi::status_name(SCSI_STATUS_CHECK_CONDITION),
                                     scsi::sense_key_name(uint8_t(task->sense.key)),
                                     scsi_asc_words(task->sense.ascq));
  }
  if (task) L().scsi_free_scsi_task(task);
}

// Ctrl-C or SIGTERM stops the battery and the report covers what ran; a second one ends the probe
// at once, its temporary capture removed (unlink is safe in a handler).
volatile sig_atomic_t g_probe_signal = 0;
char g_probe_tmp[4096] = "";
extern "C" void on_probe_signal(int sig) {
  if (g_probe_signal) {
    if (g_probe_tmp[0]) unlink(g_probe_tmp);
    _exit(128 + sig);
  }
  g_probe_signal = sig;
}
constexpr const char* kInterrupted = "interrupted (Ctrl-C or SIGTERM)";

// One turn: up to 100 ms for the connection or the capture. Empty unless it stopped.
std::string service_once(iscsi_context* iscsi, Capture& cap, std::chrono::steady_clock::time_point deadline,
                         std::chrono::seconds limit) {
  if (g_probe_signal) return kInterrupted;
  pollfd pf[2] = {{L().iscsi_get_fd(iscsi), short(L().iscsi_which_events(iscsi)), 0}, {cap.fd(), POLLIN, 0}};
  if (poll(pf, 2, 100) < 0 && errno != EINTR) return fmt::format("poll: {}", std::strerror(errno));
  if (pf[1].revents) cap.drain();
  if (L().iscsi_service(iscsi, pf[0].revents) < 0)
    return fmt::format("connection failed: {}", L().iscsi_get_error(iscsi));
  if (std::chrono::steady_clock::now() > deadline) return fmt::format("no answer within {} s", limit.count());
  return {};
}

// Waits for libiscsi's asynchronous calls, draining the capture, until `done`, a signal or the
// deadline. Empty when done, else why it stopped.
template <typename Done>
std::string serve(iscsi_context* iscsi, Capture& cap, Done done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done())
    if (std::string e = service_once(iscsi, cap, deadline, limit); !e.empty()) return e;
  return {};
}

// A libiscsi call in flight: its callback may run until the context is destroyed (a cancelled
// login), so the probe keeps it for the context's lifetime.
struct Pending {
  bool done = false;
  int status = 0;
  scsi_task* task = nullptr;
  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() { reset(); }
  void reset() {
    if (task) L().scsi_free_scsi_task(task);
    task = nullptr;
    done = false;
    status = 0;
  }
  static void cb(iscsi_context*, int status, void* data, void* p) {
    auto* s = static_cast<Pending*>(p);
    s->done = true;
    s->status = status;
    s->task = static_cast<scsi_task*>(data);
  }
};

// TCP connect, login, and TEST UNIT READY until no UNIT ATTENTION is pending (as libiscsi's full
// connect does), each asynchronous so that a signal ends the wait; not iscsi_full_connect_async,
// whose state is lost when a login is abandoned. Empty on success.
std::string login(iscsi_context* iscsi, const std::string& portal, int lun, Capture& cap, Pending& p) {
  const auto wait = [&](int queued) {
    if (queued != 0) return std::string(L().iscsi_get_error(iscsi));
    if (std::string e = serve(
            iscsi, cap, [&] { return p.done; }, std::chrono::seconds(60));
        !e.empty())
      return e;
    return p.status == 0 || p.task ? std::string() : std::string(L().iscsi_get_error(iscsi));
  };
  p.reset();
  if (std::string e = wait(L().iscsi_connect_async(iscsi, portal.c_str(), Pending::cb, &p)); !e.empty()) return e;
  p.reset();
  if (std::string e = wait(L().iscsi_login_async(iscsi, Pending::cb, &p)); !e.empty()) return e;
  for (int i = 0; i < 10; ++i) {
    p.reset();
    if (!L().iscsi_testunitready_task(iscsi, lun, Pending::cb, &p)) return L().iscsi_get_error(iscsi);
    if (std::string e = wait(0); !e.empty()) return e;
    if (!(p.task && p.task->status == SCSI_STATUS_CHECK_CONDITION &&
          p.task->sense.key == SCSI_SENSE_UNIT_ATTENTION))
      break;
  }
  p.reset();
  return {};
}

// One step of the battery: `commands` of `bytes` each, `queue_depth` outstanding, sequential LBAs
// wrapping inside [first, last]. Empty on success, else why it stopped.
std::string run_step(Run& run, int lun, const Step& s, uint32_t block, uint64_t first, uint64_t last,
                     uint64_t& cursor, const std::vector<unsigned char>& zeros) {
  const uint64_t blocks = s.bytes / block;
  int issued = 0;
  const auto limit = std::chrono::seconds(120);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (issued < s.commands || run.in_flight > 0) {
    while (run.in_flight < s.queue_depth && issued < s.commands) {
      if (cursor + blocks - 1 > last) cursor = first;
      scsi_task* t =
          s.write ? L().iscsi_write16_task(run.iscsi, lun, cursor, const_cast<unsigned char*>(zeros.data()),
                                       s.bytes, int(block), 0, 0, 0, 0, 0, completed, &run)
                  : L().iscsi_read16_task(run.iscsi, lun, cursor, s.bytes, int(block), 0, 0, 0, 0, 0, completed,
                                      &run);
      if (!t) return fmt::format("cannot queue a command: {}", L().iscsi_get_error(run.iscsi));
      cursor += blocks;
      ++run.in_flight;
      ++issued;
    }
    if (std::string e = service_once(run.iscsi, *run.cap, deadline, limit); !e.empty()) return e;
    if (run.failed) return fmt::format("a command failed: {}", run.first_error);
  }
  return {};
}

bool parse_range(const std::string& text, uint64_t& first, uint64_t& last) {
  const auto dash = text.find('-');
  if (dash == std::string::npos) return false;
  char* end = nullptr;
  first = std::strtoull(text.c_str(), &end, 0);
  if (end != text.c_str() + dash) return false;
  last = std::strtoull(text.c_str() + dash + 1, &end, 0);
  return *end == 0 && dash + 1 < text.size() && last >= first;
}

}  // namespace

namespace {

struct ProbeArgs {
  std::string url, iface = "any", keep, range, initiator = kDefaultInitiator;
  bool allow_write = false;
  int count = 16;
};

int run_probe(const ProbeArgs& args, ReportCommand& report) {
  const std::string &url = args.url, &iface = args.iface, &keep = args.keep, &range = args.range,
                    &initiator = args.initiator;
  const bool allow_write = args.allow_write;
  const int count = args.count;
  if (url.rfind("iscsi://", 0) != 0) {
    std::fprintf(stderr, "iscsi-doctor probe: name the target as iscsi://HOST[:PORT]/IQN/LUN\n");
    return kExitUnusable;
  }
  const bool quiet = report.opt.quiet;
  const auto say = [&](const std::string& s) {
    if (!quiet) std::fprintf(stderr, "iscsi-doctor probe: %s\n", s.c_str());
  };
  const auto fail = [](const std::string& s) {
    std::fprintf(stderr, "iscsi-doctor probe: error: %s\n", s.c_str());
    return kExitUnusable;
  };
  uint64_t first = 0, last = 0;
  const bool have_range = !range.empty();
  if (have_range && !parse_range(range, first, last))
    return fail("--lba-range takes FIRST-LAST, FIRST <= LAST");
  if (allow_write && !have_range)
    return fail("--allow-write needs --lba-range: the blocks the writes may overwrite");

  std::string no_libiscsi;
  if (!(g_libiscsi = libiscsi(no_libiscsi))) return fail("libiscsi not available: " + no_libiscsi);

  Pending pending;  // declared before the context's closer: outlives any callback it makes
  iscsi_context* iscsi = L().iscsi_create_context(initiator.c_str());
  if (!iscsi) return fail("libiscsi could not make a context");
  struct Closer {
    iscsi_context* c;
    ~Closer() { L().iscsi_destroy_context(c); }
  } closer{iscsi};
  iscsi_url* u = L().iscsi_parse_full_url(iscsi, url.c_str());
  if (!u) return fail(fmt::format("{}: {}", url, L().iscsi_get_error(iscsi)));
  const std::string portal = u->portal, target = u->target;
  const int lun = u->lun;
  L().iscsi_set_targetname(iscsi, target.c_str());
  if (u->user[0]) L().iscsi_set_initiator_username_pwd(iscsi, u->user, u->passwd);
  L().iscsi_destroy_url(u);
  L().iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
  L().iscsi_set_timeout(iscsi, 60);

  std::string host, port;
  if (!split_portal(portal, host, port)) return fail(fmt::format("cannot read the portal '{}'", portal));
  addrinfo hints{}, *ai = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &ai); rc != 0)
    return fail(fmt::format("{}: {}", host, gai_strerror(rc)));
  const std::string addr = numeric(ai->ai_addr);
  freeaddrinfo(ai);

  std::string path = keep;
  if (path.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    path = fmt::format("{}/iscsi-doctor-probe-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    const int fd = mkstemp(path.data());
    if (fd < 0) return fail(fmt::format("cannot make a temporary file: {}", std::strerror(errno)));
    ::close(fd);
  }
  struct Remover {
    std::string p;
    ~Remover() {
      if (!p.empty()) std::remove(p.c_str());
    }
  } remover{keep.empty() ? path : std::string()};
  if (keep.empty() && path.size() < sizeof g_probe_tmp)
    std::memcpy(g_probe_tmp, path.c_str(), path.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = on_probe_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  Capture cap;
  // Until the login shows the probe's own port, the filter takes any connection to the portal.
  if (auto e = cap.open(iface, fmt::format("tcp and host {} and port {}", addr, port), path); !e.empty())
    return fail(fmt::format("cannot capture on {}: {} (root or CAP_NET_RAW is needed)", iface, e));
  say(fmt::format("capturing on {}, logging in to {} at {}", iface, target, portal));
  if (const std::string e = login(iscsi, portal, lun, cap, pending); !e.empty())
    return fail(fmt::format("login to {} at {} failed: {}", target, portal, e));
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  const int sock = L().iscsi_get_fd(iscsi);
  if (getsockname(sock, reinterpret_cast<sockaddr*>(&local), &ll) == 0 &&
      getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &pl) == 0) {
    const auto* l = reinterpret_cast<const sockaddr*>(&local);
    const auto* r = reinterpret_cast<const sockaddr*>(&peer);
    cap.drain();  // what came under the wider filter first
    if (auto e = cap.set_filter(fmt::format("tcp and host {} and port {} and host {} and port {}", numeric(l),
                                            port_of(l), numeric(r), port_of(r)));
        !e.empty())
      say(e);
  }
  cap.drain();

  uint32_t block = 0;
  uint64_t max_lba = 0;
  if (scsi_task* t = L().iscsi_readcapacity16_sync(iscsi, lun); t && t->status == SCSI_STATUS_GOOD) {
    if (auto* rc16 = static_cast<scsi_readcapacity16*>(L().scsi_datain_unmarshall(t))) {
      block = rc16->block_length;
      max_lba = rc16->returned_lba;
    }
    L().scsi_free_scsi_task(t);
  } else {
    if (t) L().scsi_free_scsi_task(t);
    if (scsi_task* t10 = L().iscsi_readcapacity10_sync(iscsi, lun, 0, 0);
        t10 && t10->status == SCSI_STATUS_GOOD) {
      if (auto* rc10 = static_cast<scsi_readcapacity10*>(L().scsi_datain_unmarshall(t10))) {
        block = rc10->block_size;
        max_lba = rc10->lba;
      }
      L().scsi_free_scsi_task(t10);
    } else if (t10) {
      L().scsi_free_scsi_task(t10);
    }
  }
  if (block == 0) return fail(fmt::format("LUN {}: READ CAPACITY failed: {}", lun, L().iscsi_get_error(iscsi)));
  if (!have_range) last = std::min<uint64_t>(max_lba, (64ull << 20) / block - 1);
  if (last > max_lba) return fail(fmt::format("--lba-range ends past the LUN's last block ({})", max_lba));
  say(fmt::format("LUN {}: {} blocks of {} bytes; the battery uses blocks {}-{}", lun, max_lba + 1, block,
                  first, last));

  Run run;
  run.iscsi = iscsi;
  run.cap = &cap;
  std::vector<Step> steps = battery(false, count);
  if (allow_write)
    for (const Step& s : battery(true, count))
      steps.push_back(s);
  const std::vector<unsigned char> zeros(1048576, 0);
  uint64_t cursor = first;
  std::string stopped = g_probe_signal ? kInterrupted : "";
  for (const Step& s : steps) {
    if (!stopped.empty()) break;
    if (s.bytes % block != 0 || s.bytes / block > last - first + 1) {
      say(fmt::format("{}: skipped (blocks of {} bytes, {} blocks in range)", step_name(s), block,
                      last - first + 1));
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    stopped = run_step(run, lun, s, block, first, last, cursor, zeros);
    if (!stopped.empty()) {
      stopped = fmt::format("{}: {}", step_name(s), stopped);
      break;
    }
    say(fmt::format(
        "{}: {} commands in {:.0f} ms", step_name(s), s.commands,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()));
  }
  if (stopped.empty()) L().iscsi_logout_sync(iscsi);
  L().iscsi_disconnect(iscsi);
  if (const unsigned dropped = cap.finish(300); dropped)
    say(fmt::format("warning: the capture dropped {} packets: the report may miss some", dropped));
  if (!keep.empty()) say(fmt::format("capture kept in {}", keep));

  report.opt.inputs = {path};
  if (port != "3260" && !report.port_given()) {  // the portal's own port, whatever detection makes of it
    unsigned p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec == std::errc() && end == port.data() + port.size() && p > 0 && p < 65536)
      report.port_options.ports = {uint16_t(p)};
  }
  const int code = report.run();
  if (!stopped.empty()) {
    std::fprintf(stderr, "iscsi-doctor probe: error: the battery stopped: %s\n", stopped.c_str());
    return kExitUnusable;
  }
  return code;
}

}  // namespace

std::function<int()> add_probe_command(CLI::App& parent, ReportCommand& report) {
  CLI::App& app = *parent.add_subcommand(
      "probe",
      "logs in to a target with libiscsi, runs a fixed battery of commands while capturing its own "
      "connection, and reports on that capture (any option of the plain command applies: --format, "
      "--fail-on, --junit, ...; iscsi-doctor probe --help)");
  // The plain command's options (formats, gates) are the report's: they fall through to it.
  app.fallthrough();
  auto a = std::make_shared<ProbeArgs>();
  app.add_option("URL", a->url, "the target: iscsi://HOST[:PORT]/IQN/LUN");
  app.add_flag("--allow-write", a->allow_write,
               "also run the WRITE battery (zeros) inside --lba-range: the data there is overwritten");
  app.add_option(
      "--lba-range", a->range,
      "FIRST-LAST: the logical blocks the battery may use (required with --allow-write; default for "
      "reads: the first 64 MiB)");
  app.add_option("--count", a->count,
                 "commands per QD1 step (default 16; 1 MiB: a quarter; QD n steps: n times as many)")
      ->check(CLI::Range(1, 100000));
  app.add_option("-i,--interface", a->iface, "where to capture the probe's connection (default any)");
  app.add_option("-w,--write", a->keep, "also keep the capture in this pcap file");
  app.add_option("--initiator-name", a->initiator,
                 std::string("the initiator's IQN (default ") + kDefaultInitiator + ")");
  app.footer(
      "URL: iscsi://HOST[:PORT]/IQN/LUN (libiscsi's form; user%password@ for CHAP).\n"
      "Exit code: the report's (0, 1 when a gate fails), or 2 when the target could not be probed.");
  return [a, &report] { return run_probe(*a, report); };
}

}  // namespace iscsi_doctor::cli
