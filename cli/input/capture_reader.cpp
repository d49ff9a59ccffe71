// SPDX-License-Identifier: GPL-2.0-or-later
// libpcap reads the file (pcap and pcapng alike, timestamps scaled to nanoseconds); a compressed
// file is decompressed behind a stdio FILE* (fopencookie, decompress.hpp) that libpcap reads like
// any other. The pcap_t is owned by an OfflineHandle, which closes it. Each packet goes to the
// decoder chosen for the link type (packet_decoder.hpp) and, when it is TCP, to the caller as a
// Segment.
//
// What libpcap cannot read goes through libwiretap (wiretap_reader.hpp), each packet to the decoder
// of its own link type: a format libpcap does not know, from the start; a pcapng whose interfaces
// differ in link type, from where libpcap gives up (it reads the first interface only when it opens
// the file), the frames it already handed on skipped. wiretap opens files by name: a stream, or a
// file we decompress, reaches it through a pipe fed by a thread (PipeFeed), never through the disk.
//
// Here: the one walk over a file's records (first and second pass alike).
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

ReadStats CaptureReader::Impl::read(ReaderEvents& events, const FrameRanges* only) {
  Impl& m = *this;
  pcap_t* p = m.handle ? m.handle->get_pcap_handle() : nullptr;
  ReadStats st;
  Segment seg;
  int shown_truncated = 0, shown_malformed = 0;
  uint64_t first_fragment = 0;
  uint64_t first_odd = 0;  // the first frame whose sub-second field was out of range, and that part
  int64_t first_odd_sub = 0;
  bool at_end = false;
  WiretapRecord wr;

  // The next record from the file, with libpcap's checks and messages (sf-pcap.c).
  pcap_pkthdr record{};
  std::string record_error;
  const auto read_failed = [&]() {
    return m.read_errno ? fmt::format("error reading dump file: {}", std::strerror(m.read_errno)) : "";
  };
  auto next_record = [&](pcap_pkthdr** h, const u_char** data) -> int {
    if (!m.fill(16)) {
      const size_t left = m.win_end - m.win_pos;
      if (m.read_errno) {
        record_error = read_failed();
        return PCAP_ERROR;
      }
      if (left == 0) return PCAP_ERROR_BREAK;
      record_error = fmt::format("truncated dump file; tried to read 16 header bytes, only got {}", left);
      return PCAP_ERROR;
    }
    const uint8_t* r = m.win + m.win_pos;
    const uint32_t frac = m.field32(r + 4), caplen = m.field32(r + 8), len = m.field32(r + 12);
    // libpcap reads a record longer than the snaplen (up to its per-link maximum, 256 KiB for
    // most) and keeps snaplen bytes; longer ones are corrupt.
    if (caplen > m.snaplen && caplen > 262144) {
      record_error =
          fmt::format("invalid packet capture length {}, bigger than snaplen of {}", caplen, m.snaplen);
      return PCAP_ERROR;
    }
    const uint64_t left = m.file_size - std::min(m.file_size, m.win_offset + m.win_pos + 16);
    // What libpcap's fread got: the rest of the file (not what the window happens to hold of it).
    if (caplen > left || !m.fill(16 + size_t(caplen))) {
      record_error = m.read_errno ? read_failed()
                                  : fmt::format("truncated dump file; tried to read {} captured bytes, only got {}",
                                                caplen, caplen > left ? left : uint64_t(m.win_end - m.win_pos - 16));
      return PCAP_ERROR;
    }
    r = m.win + m.win_pos;  // the window may have moved
    record.ts.tv_sec = time_t(m.field32(r));
    record.ts.tv_usec = suseconds_t(m.nanosecond ? frac : uint64_t(frac) * 1000);  // nanoseconds, as asked
    record.caplen = std::min(caplen, m.snaplen);
    record.len = len;
    *h = &record;
    *data = r + 16;
    m.win_pos += 16 + size_t(caplen);
    return 1;
  };

  // The next record through wiretap: h and data as libpcap gives them, the decoder of its link
  // type (null: not decoded) and its time.
  Link* link = nullptr;
  auto wiretap_record = [&](pcap_pkthdr** h, const u_char** data, DecodeFn& fn, int64_t& t, int64_t& sub,
                            bool& odd) -> int {
    for (;;) {
      const int rc = m.wt->next(wr, record_error);
      if (rc <= 0) return rc == 0 ? PCAP_ERROR_BREAK : PCAP_ERROR;
      link = wr.packet ? &m.link_of(wr.encap, wr.dlt) : nullptr;
      if (m.skip_packets > 0) {  // libpcap handed these on before it gave up
        if (wr.packet) --m.skip_packets;
        continue;
      }
      record.caplen = wr.caplen;
      record.len = wr.len;
      *h = &record;
      *data = wr.data;
      fn = link ? link->decode : nullptr;
      t = wr.has_time ? wr.time_ns : st.last_ns;  // a record without a time: its predecessor's
      odd = wr.odd_time;
      sub = wr.sub_ns;
      return 1;
    }
  };

  size_t range = 0;  // the first of `only` not yet passed
  for (;;) {
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    DecodeFn decode = m.decode;
    int64_t t = 0, sub = 0;
    bool odd = false;
    if (m.live && m.live_done(st.packets)) break;
    if (m.max_packets && st.packets >= m.max_packets) break;
    const int rc = m.wt        ? wiretap_record(&h, &data, decode, t, sub, odd)
                   : m.fd >= 0 ? next_record(&h, &data)
                               : pcap_next_ex(p, &h, &data);
    if (m.live && rc == 0) {  // nothing yet: wait a while for the next packet
      pollfd pfd{m.live_fd, POLLIN, 0};
      ::poll(&pfd, 1, 100);
      continue;
    }
    if (rc != 1) {
      if (rc == PCAP_ERROR_BREAK) {  // end of file
        at_end = true;
        break;
      }
      if (m.wt && m.probe.stream && g_stream_signal) break;  // Ctrl-C met wiretap in its read
      std::string why = m.fd >= 0 || m.wt ? record_error : std::string(pcap_geterr(p));
      // A pcapng interface of another link type: libpcap cannot go on, wiretap can.
      if (!m.wt && why.find("different from the type of the first interface") != std::string::npos &&
          m.switch_to_wiretap(st.packets)) {
        events.on_notice(Notice::Level::info, st.packets,
                         fmt::format("read through wiretap{}: libpcap stopped: {}",
                                     st.packets ? fmt::format(" after frame {}", st.packets) : "", why));
        p = nullptr;
        continue;
      }
      st.damaged = true;
      if (m.wt) m.close_wiretap();  // its feed has ended: what it met can be read
      if (m.decomp && !m.decomp->error.empty()) why = m.decomp->error + "; " + why;
      events.on_notice(Notice::Level::error, st.packets,
                       st.packets == 0
                           ? fmt::format("capture unreadable from its first packet: {}", why)
                           : fmt::format("capture damaged after frame {}: {}; the analysis covers "
                                         "frames 1-{}",
                                         st.packets, why, st.packets));
      break;
    }
    const uint64_t frame = ++st.packets;
    if (m.live) {
      if (m.dump) pcap_dump(reinterpret_cast<u_char*>(m.dump), h, data);
      if (m.live_usec) h->ts.tv_usec *= 1000;
      m.consumed += h->caplen;
    }
    if (frame % kProgressEvery == 0) events.on_progress(frame, m.bytes_done());
    if (!m.wt) {
      // A corrupt pcapng timestamp can exceed int64 nanoseconds: clamp to +-2^62 (year 2116),
      // which keeps every difference the engine takes in range.
      constexpr int64_t kMaxSec = (int64_t(1) << 62) / 1'000'000'000;
      sub = int64_t(h->ts.tv_usec);
      if (sub < 0 || sub >= 1'000'000'000) {
        // A pcap record's sub-second field out of range (>= 10^6 us, >= 10^9 ns). Wireshark
        // (wiretap/libpcap.c) takes microseconds times 1000 in 32 bits and adds that, as a signed
        // number of nanoseconds, to the seconds (0xFFFFFFFF us: 1 us before the second); so do we.
        sub = int64_t(int32_t(uint32_t(uint64_t(sub))));
        odd = true;
      }
      t = std::clamp<int64_t>(int64_t(h->ts.tv_sec), -kMaxSec, kMaxSec) * 1'000'000'000 + sub;
    }
    if (odd && st.odd_times++ == 0) {
      first_odd = frame;
      first_odd_sub = sub;
    }
    if (frame == 1) {
      st.first_ns = t;
      events.on_start(t);
    }
    st.last_ns = t;
    if (only) {
      while (range < only->size() && frame > (*only)[range].second)
        ++range;
      if (range == only->size()) break;            // past the last range: the rest is not needed
      if (frame < (*only)[range].first) continue;  // between ranges: not decoded
    }
    if (!decode) {  // wiretap: an event, or a packet of a link type no decoder knows
      if (link) {
        ++st.undecodable;
        if (!link->warned)
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("packets of link type {} ({}) skipped: no decoder for it", link->name,
                                       link->description));
        link->warned = true;
      }
      continue;
    }
    const uint32_t caplen = h->caplen;
    const Frame f{{data, caplen}, h->len > caplen ? h->len - caplen : 0};
    std::string_view why;
    switch (decode(f, seg, why)) {
      case Decoded::tcp:
        seg.frame = frame;
        seg.time_ns = t;
        ++st.tcp_segments;
        st.tcp_payload_bytes += seg.payload.size();
        if (seg.payload.size() < seg.payload_wire_len && st.snapped++ == 0)
          events.on_notice(Notice::Level::info, frame,
                           fmt::format("packet cut at {} of {} bytes by the capture's snaplen: "
                                       "payload beyond it is missing from the capture",
                                       caplen, h->len));
        events.on_segment(seg);
        if (events.finished()) return st;
        break;
      case Decoded::not_tcp:
        break;
      case Decoded::fragment:
        if (st.fragments++ == 0) {
          first_fragment = frame;
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("{} skipped: IP fragments are not reassembled", why));
        }
        break;
      case Decoded::truncated:
        ++st.truncated;
        if (shown_truncated++ < kPacketNoticesShown)
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("packet skipped: {} cut short ({} bytes captured)", why, caplen));
        break;
      case Decoded::malformed:
        ++st.malformed;
        if (shown_malformed++ < kPacketNoticesShown)
          events.on_notice(Notice::Level::warning, frame, fmt::format("packet skipped: {}", why));
        break;
    }
  }
  if (m.wt && at_end) m.close_wiretap();
  if (m.probe.stream) m.probe.size = m.consumed;
  if (m.live) {
    if (m.dump) pcap_dump_flush(m.dump);
    if (!m.live_warning.empty()) events.on_notice(Notice::Level::warning, 0, m.live_warning);
    pcap_stat ps{};
    if (pcap_stats(p, &ps) == 0 && (ps.ps_drop || ps.ps_ifdrop))
      events.on_notice(Notice::Level::warning, 0,
                       fmt::format("{} packets dropped by the kernel (its capture buffer was full), {} by "
                                   "the interface: the analysis misses them (a larger --buffer, a narrower "
                                   "--port list, or -w and a later read help)",
                                   ps.ps_drop, ps.ps_ifdrop));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m.live_start).count();
    events.on_notice(
        Notice::Level::info, 0,
        fmt::format("{} packets captured live in {:.1f} s (filter '{}'){}", st.packets, secs,
                    live_filter(*m.live),
                    m.live->write_path.empty() ? "" : fmt::format(", written to {}", m.live->write_path)));
  }
  if (m.probe.stream && g_stream_signal)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("reading stopped by {} after frame {}: the report covers what came before",
                                 g_stream_signal == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM", st.packets));
  if (m.decomp && !st.damaged && !m.decomp->error.empty()) {
    st.damaged = true;
    events.on_notice(Notice::Level::error, st.packets,
                     fmt::format("{} after frame {}", m.decomp->error, st.packets));
  }
  if (m.decomp && !m.decomp->warning.empty()) events.on_notice(Notice::Level::warning, 0, m.decomp->warning);
  if (st.fragments > 1)
    events.on_notice(
        Notice::Level::warning, first_fragment,
        fmt::format("{} IP fragments skipped in all (first at frame {})", st.fragments, first_fragment));
  if (st.truncated > kPacketNoticesShown)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} packets skipped in all because a header was cut short", st.truncated));
  if (st.malformed > kPacketNoticesShown)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} malformed packets skipped in all", st.malformed));
  if (st.undecodable > 1)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} packets of link types no decoder knows skipped in all", st.undecodable));
  if (st.odd_times) {
    const std::string how = m.probe.format == FileFormat::pcap && m.probe.wiretap_format.empty()
                                ? " (the field, microseconds times 1000, as a signed 32-bit count of nanoseconds)"
                                : "";
    events.on_notice(
        Notice::Level::warning, first_odd,
        st.odd_times == 1
            ? fmt::format("a timestamp's sub-second field is out of range: timed as Wireshark times it, "
                          "{:+.9f} s from its second{}",
                          double(first_odd_sub) / 1e9, how)
            : fmt::format("{} timestamps' sub-second fields are out of range (the first at frame {}): timed "
                          "as Wireshark times them, the first {:+.9f} s from its second{}",
                          st.odd_times, first_odd, double(first_odd_sub) / 1e9, how));
  }
  if (st.packets == 0 && !st.damaged)
    events.on_notice(Notice::Level::warning, 0, "the capture holds no packets");
  events.on_progress(st.packets, m.bytes_done());
  return st;
}

}  // namespace iscsi_doctor::cli
