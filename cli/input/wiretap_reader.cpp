// SPDX-License-Identifier: GPL-2.0-or-later
// libwiretap behind a small interface, built as the module iscsi-doctor-wiretap.so (loaded by
// wiretap_file.cpp when a run first needs it: input/optional_module.hpp). The API moved between
// the Wireshark versions we build against: 4.6 keeps a record's bytes in the wtap_rec (wtap_read
// without a Buffer, wtap_rec_init with a size); 4.0 and 4.4 read into a Buffer of the caller's.
// Everything else used here is the same in 4.0, 4.4 and 4.6.
#include "input/wiretap_module.hpp"

#include <fmt/format.h>

#include "net/dlt.hpp"
#include <ws_version.h>
#include <wiretap/wtap.h>

#include <algorithm>
#include <memory>
#include <mutex>

#define ISCSI_DOCTOR_WTAP_REC_DATA (WIRESHARK_VERSION_MAJOR > 4 || WIRESHARK_VERSION_MINOR >= 6)

namespace iscsi_doctor::cli {

namespace {

// ERF record types (wiretap/erf_record.h, not installed): Ethernet ones carry a 2-byte pad that
// wiretap moves into the pseudo-header, so what is left is a plain Ethernet frame.
constexpr int kErfTypeMask = 0x7f;
constexpr int kErfEth = 2, kErfColorEth = 11, kErfDsmColorEth = 16, kErfColorHashEth = 20, kErfIpv4 = 22,
              kErfIpv6 = 23;
constexpr int kErfBase = -1000;  // WiretapRecord::encap of an ERF record: kErfBase - type

// The libpcap link type whose decoder reads packets of a wiretap encapsulation; -1: none.
int dlt_of_encap(int encap) {
  switch (encap) {
    case WTAP_ENCAP_ETHERNET:
    case WTAP_ENCAP_NETTL_ETHERNET:  // HP-UX nettl: its header is in the pseudo-header
      return DLT_EN10MB;
    case WTAP_ENCAP_RAW_IP:  // pcap link types 12, 14 (OpenBSD's DLT_RAW) and 101
    case WTAP_ENCAP_NETTL_RAW_IP:
      return DLT_RAW;
    case WTAP_ENCAP_RAW_IP4:
      return DLT_IPV4;
    case WTAP_ENCAP_RAW_IP6:
      return DLT_IPV6;
    case WTAP_ENCAP_NULL:
      return DLT_NULL;
    case WTAP_ENCAP_LOOP:
      return DLT_LOOP;
    case WTAP_ENCAP_SLL:
      return DLT_LINUX_SLL;
    case WTAP_ENCAP_SLL2:
      return DLT_LINUX_SLL2;
    case WTAP_ENCAP_PPP:
      return DLT_PPP;
    case WTAP_ENCAP_IEEE_802_11:
      return DLT_IEEE802_11;
    case WTAP_ENCAP_IEEE_802_11_RADIOTAP:
      return DLT_IEEE802_11_RADIO;
    case WTAP_ENCAP_PPI:
      return DLT_PPI;
    case WTAP_ENCAP_PKTAP:
      return DLT_PKTAP;
    default:
      return -1;
  }
}

int dlt_of_erf(int type) {
  switch (type & kErfTypeMask) {
    case kErfEth:
    case kErfColorEth:
    case kErfDsmColorEth:
    case kErfColorHashEth:
      return DLT_EN10MB;
    case kErfIpv4:
      return DLT_IPV4;
    case kErfIpv6:
      return DLT_IPV6;
    default:
      return -1;
  }
}

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    // wiretap logs each format it tries; before ws_log is set it shows everything. Its errors
    // reach us through wtap_read's and wtap_open_offline's own.
    ws_log_set_level(LOG_LEVEL_CRITICAL);
    wtap_init(false);
  });
}

std::string wtap_error(int err, char* info) {
  std::string s = wtap_strerror(err);
  if (info) {
    s += fmt::format(" ({})", info);
    g_free(info);
  }
  return s;
}

struct File {
  wtap* wth = nullptr;
  // What the open file said of itself, kept for after close().
  std::string type_name;
  int file_encap = WTAP_ENCAP_UNKNOWN;
  uint64_t bytes_read = 0;
  wtap_rec rec{};
#if !ISCSI_DOCTOR_WTAP_REC_DATA
  Buffer buf{};
#endif

  File() {
#if ISCSI_DOCTOR_WTAP_REC_DATA
    wtap_rec_init(&rec, 2048);
#else
    wtap_rec_init(&rec);
    ws_buffer_init(&buf, 2048);
#endif
  }
  ~File() {
    wtap_rec_cleanup(&rec);
#if !ISCSI_DOCTOR_WTAP_REC_DATA
    ws_buffer_free(&buf);
#endif
    close();
  }
  void close() {
    if (!wth) return;
    bytes_read = uint64_t(std::max<gint64>(0, wtap_read_so_far(wth)));
    wtap_close(wth);
    wth = nullptr;
  }
};

void* open_file(const std::string& path, std::string& error) {
  init_once();
  auto impl = std::make_unique<File>();
  int err = 0;
  char* info = nullptr;
  {
    // Opening tries every format's heuristics; keep it to one thread at a time (-j).
    static std::mutex mu;
    std::lock_guard lock(mu);
    impl->wth = wtap_open_offline(path.c_str(), WTAP_TYPE_AUTO, &err, &info, false);
  }
  if (!impl->wth) {
    error = wtap_error(err, info);
    return nullptr;
  }
  const char* name = wtap_file_type_subtype_name(wtap_file_type_subtype(impl->wth));
  impl->type_name = name ? name : "unknown";
  impl->file_encap = wtap_file_encap(impl->wth);
  return impl.release();
}

int next_record(void* file, WiretapRecord& out, std::string& error) {
  File& m = *static_cast<File*>(file);
  if (!m.wth) return 0;
  int err = 0;
  char* info = nullptr;
  gint64 offset = 0;
  wtap_rec_reset(&m.rec);  // frees the previous record's block, as Wireshark's own loops do
#if ISCSI_DOCTOR_WTAP_REC_DATA
  const bool ok = wtap_read(m.wth, &m.rec, &err, &info, &offset);
#else
  const bool ok = wtap_read(m.wth, &m.rec, &m.buf, &err, &info, &offset);
#endif
  if (!ok) {
    if (err == 0) return 0;
    error = wtap_error(err, info);
    return -1;
  }
  if (info) g_free(info);
  const wtap_rec& r = m.rec;
  out = WiretapRecord{};
  out.has_time = (r.presence_flags & WTAP_HAS_TS) != 0;
  if (out.has_time) {
    // Wireshark adds nsecs as it stands, also when a file's sub-second field was out of range.
    constexpr int64_t kMaxSec = (int64_t(1) << 62) / 1'000'000'000;
    out.time_ns = std::clamp<int64_t>(int64_t(r.ts.secs), -kMaxSec, kMaxSec) * 1'000'000'000 + int64_t(r.ts.nsecs);
    out.sub_ns = r.ts.nsecs;
    out.odd_time = r.ts.nsecs < 0 || r.ts.nsecs >= 1'000'000'000;
  }
  if (r.rec_type != REC_TYPE_PACKET) return 1;
  const wtap_packet_header& ph = r.rec_header.packet_header;
  out.packet = true;
  out.caplen = ph.caplen;
  out.len = ph.len;
#if ISCSI_DOCTOR_WTAP_REC_DATA
  out.data = ws_buffer_start_ptr(&m.rec.data);
#else
  out.data = ws_buffer_start_ptr(&m.buf);
#endif
  out.encap = ph.pkt_encap;
  if (ph.pkt_encap == WTAP_ENCAP_ERF) {
    const int type = ph.pseudo_header.erf.phdr.type & kErfTypeMask;
    out.encap = kErfBase - type;
    out.dlt = dlt_of_erf(type);
  } else {
    out.dlt = dlt_of_encap(ph.pkt_encap);
  }
  return 1;
}

const File& of(const void* file) { return *static_cast<const File*>(file); }

bool decodable(const void* file) {
  const int encap = of(file).file_encap;
#ifdef WTAP_ENCAP_NONE  // 4.2+: a pcapng whose interfaces are not known yet
  if (encap == WTAP_ENCAP_NONE) return true;
#endif
  return encap == WTAP_ENCAP_PER_PACKET || encap == WTAP_ENCAP_ERF || dlt_of_encap(encap) >= 0;
}

uint64_t bytes_read(const void* file) {
  const File& m = of(file);
  return m.wth ? uint64_t(std::max<gint64>(0, wtap_read_so_far(m.wth))) : m.bytes_read;
}

std::string encap_name(int encap) {
  if (encap <= kErfBase) return fmt::format("ERF type {}", kErfBase - encap);
  const char* name = wtap_encap_name(encap);
  return name ? name : fmt::format("encapsulation {}", encap);
}

std::string encap_description(int encap) {
  if (encap <= kErfBase) return fmt::format("ERF record type {}", kErfBase - encap);
  const char* d = wtap_encap_description(encap);
  return d ? d : encap_name(encap);
}

constexpr WiretapModule kModule{
    open_file,
    [](void* file) { delete static_cast<File*>(file); },
    next_record,
    [](void* file) { static_cast<File*>(file)->close(); },
    [](const void* file) { return of(file).type_name; },
    [](const void* file) { return dlt_of_encap(of(file).file_encap); },
    decodable,
    bytes_read,
    encap_name,
    encap_description,
};

}  // namespace

}  // namespace iscsi_doctor::cli

extern "C" __attribute__((visibility("default"))) const iscsi_doctor::cli::WiretapModule*
iscsi_doctor_wiretap_module_v1() {
  return &iscsi_doctor::cli::kModule;
}
