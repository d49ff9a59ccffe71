// SPDX-License-Identifier: GPL-2.0-or-later
// Live capture with libpcap (-i): the interfaces (-D), the BPF filter, opening the interface and
// when to stop.
#include <fcntl.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "input/capture_internal.hpp"

namespace iscsi_doctor::cli {

std::string live_filter(const LiveCapture& live) {
  std::string f = "tcp";
  if (!live.detect_ports && !live.ports.empty()) {
    f += " and (";
    for (size_t i = 0; i < live.ports.size(); ++i)
      f += fmt::format("{}port {}", i ? " or " : "", live.ports[i]);
    f += ")";
  }
  return live.filter.empty() ? f : "(" + f + ") and (" + live.filter + ")";
}

std::vector<std::string> capture_interfaces() {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_if_t* all = nullptr;
  if (pcap_findalldevs(&all, err) != 0) throw CaptureError(fmt::format("cannot list interfaces: {}", err));
  std::vector<std::string> out;
  size_t n = 0;
  for (pcap_if_t* d = all; d; d = d->next)
    out.push_back(fmt::format("{}. {}{}", ++n, d->name,
                              d->description ? fmt::format(" ({})", d->description) : std::string()));
  pcap_freealldevs(all);
  return out;
}

CaptureReader::CaptureReader(const LiveCapture& live, DecoderChoice decoder)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = "live:" + live.iface;
  m.live = &live;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_create(live.iface.c_str(), errbuf);
  if (!p) throw CaptureError(fmt::format("-i {}: cannot capture: {}", live.iface, errbuf));
  // Every byte of every packet (a BHS can sit anywhere in a segment), a buffer that holds bursts,
  // nanosecond stamps where the interface has them, packets handed on within 100 ms.
  if (pcap_set_snaplen(p, 262144) != 0 || pcap_set_promisc(p, 1) != 0 || pcap_set_timeout(p, 100) != 0 ||
      pcap_set_buffer_size(p, live.buffer_mib * 1024 * 1024) != 0) {
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot set the capture up", live.iface));
  }
  const bool nano = pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO) == 0;  // else microseconds
  const int rc = pcap_activate(p);
  if (rc < 0) {
    const std::string why = rc == PCAP_ERROR ? pcap_geterr(p) : pcap_statustostr(rc);
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot capture: {}{}", live.iface, why,
                                   rc == PCAP_ERROR_PERM_DENIED ? " (run as root or with CAP_NET_RAW)" : ""));
  }
  m.live_warning = rc > 0 ? pcap_statustostr(rc) : "";
  bpf_program prog{};
  const std::string filter = live_filter(live);
  if (pcap_compile(p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 || pcap_setfilter(p, &prog) != 0) {
    const std::string why = pcap_geterr(p);
    pcap_freecode(&prog);
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: filter '{}': {}", live.iface, filter, why));
  }
  pcap_freecode(&prog);
  if (!live.write_path.empty()) {
    m.dump = pcap_dump_open(p, live.write_path.c_str());
    if (!m.dump) {
      const std::string why = pcap_geterr(p);
      pcap_close(p);
      throw CaptureError(fmt::format("-w {}: {}", live.write_path, why));
    }
  }
  m.probe.is_capture = true;
  m.probe.stream = true;
  m.probe.format = FileFormat::live;
  m.live_usec = !nano || pcap_get_tstamp_precision(p) != PCAP_TSTAMP_PRECISION_NANO;
  // Non-blocking, waited on with poll(): libpcap's timeout need not fire while no packet comes,
  // and --duration, --count and Ctrl-C must end the capture anyway.
  m.live_fd = pcap_get_selectable_fd(p);
  if (m.live_fd < 0 || pcap_setnonblock(p, 1, errbuf) != 0) {
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot wait for packets: {}", live.iface, errbuf));
  }
  m.handle = std::make_unique<OfflineHandle>(p);
  m.choose_decoder(decoder, "-i " + live.iface);
  m.live_start = std::chrono::steady_clock::now();
}

bool CaptureReader::Impl::live_done(uint64_t packets) const {
  if (g_stream_signal) return true;
  if (live->count && packets >= live->count) return true;
  return live->duration_s > 0 &&
         std::chrono::steady_clock::now() - live_start >= std::chrono::duration<double>(live->duration_s);
}

}  // namespace iscsi_doctor::cli
