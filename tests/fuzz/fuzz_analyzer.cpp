// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes the whole engine: a segment timeline (both directions, SYNs, FINs, RSTs, holes,
// retransmissions, odd windows and options, snaplen cuts) built from the input and fed to an
// Analyzer, then finish(). Each segment takes a 12-byte header from the input:
//   0 flags/direction  1 payload length  2-3 sequence step  4-5 ack step  6 time step  7 window
//   8 options (MSS/wscale/options_len)  9 snaplen cut  10-11 which of a few 4-tuples
// followed by its payload. Mode bit 0x80 of byte 1 takes the payload from a valid iSCSI PDU
// stream (a login, then commands and answers) instead, so the fuzzer starts deep in the rules.
#include <cstdint>
#include <cstring>
#include <vector>

#include "iscsi/pdu_builder.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/summary.hpp"

using namespace iscsi_doctor;

namespace {

struct CountingSink : Sink {
  uint64_t commands = 0, findings = 0, notices = 0;
  void on_command(const CommandResult& c) override {
    ++commands;
    if (c.completed && c.latency_ms < 0 && c.status_frame < c.first_frame) __builtin_trap();
  }
  void on_finding(const Finding&) override { ++findings; }
  void on_notice(const Notice& n) override {
    ++notices;
    if (n.message.empty()) __builtin_trap();
  }
};

// A plausible stream of PDUs for one direction: login, then SCSI commands (or their answers).
std::vector<uint8_t> pdu_stream(bool initiator, const uint8_t* d, size_t n) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 3 <= n && out.size() < 65536; i += 3) {
    iscsi::Bhs b;
    static constexpr uint8_t kIni[] = {0x43, 0x01, 0x05, 0x00, 0x02, 0x06, 0x04};
    static constexpr uint8_t kTgt[] = {0x23, 0x21, 0x25, 0x31, 0x20, 0x22, 0x26};
    b.opcode = uint8_t((initiator ? kIni[d[i] % sizeof kIni] : kTgt[d[i] % sizeof kTgt]) & 0x3f);
    b.immediate = initiator && (b.opcode == 0x03 || d[i + 1] & 0x20);
    b.flags = uint8_t(0x80 | (d[i + 1] & 0x4f));
    b.itt = d[i + 2] & 0x0f;
    std::vector<uint8_t> data((d[i + 1] >> 4) * 256u);
    if (b.opcode == 0x03 || b.opcode == 0x23) {
      static const char keys[] = "HeaderDigest=None\0DataDigest=None\0MaxRecvDataSegmentLength=8192\0";
      data.assign(keys, keys + sizeof keys - 1);
    }
    if (b.opcode == 0x01) {
      b.cdb[0] = (d[i + 2] & 0x10) ? 0x2a : 0x28;
      b.cdb[8] = 8;
      b.w20 = 4096;
    }
    const auto pdu = iscsi::encode_pdu(b, data, false, false);
    out.insert(out.end(), pdu.begin(), pdu.end());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Options o;
  o.max_open_commands = 64;  // small caps so the fuzzer reaches them
  o.max_connections = 4;
  o.max_out_of_order_bytes = 1 << 16;
  o.detect_ports = data[0] & 1;
  CountingSink sink;
  Analyzer a(o, sink);

  const bool structured = data[1] & 0x80;
  std::vector<uint8_t> streams[2];
  if (structured) {
    streams[0] = pdu_stream(true, data, size);
    streams[1] = pdu_stream(false, data + size / 2, size - size / 2);
  }
  size_t taken[2] = {0, 0};
  uint32_t seq[2] = {1000, 900000}, ack[2] = {0, 0};
  int64_t t = 1'000'000'000;
  uint64_t frame = 0;
  size_t at = 2;
  while (at + 12 <= size) {
    const uint8_t* h = data + at;
    at += 12;
    const int dir = h[0] & 1;
    size_t len = h[1];
    if (h[0] & 0x40) len *= 16;
    Segment s;
    s.frame = ++frame;
    t += int64_t(h[6]) * 50'000;
    s.time_ns = t;
    const uint8_t tuple = h[10] % 3;
    Endpoint ini{Address::ipv4(0x0a000001 + tuple), uint16_t(40000 + tuple)};
    Endpoint tgt{Address::ipv4(0x0a0000fe), uint16_t(h[11] & 1 ? 3260 : 860)};
    s.src = dir ? tgt : ini;
    s.dst = dir ? ini : tgt;
    s.flags = uint8_t(h[0] & 0x3f) | tcp_flag::ack;
    if (!(h[0] & 0x80)) s.flags &= uint8_t(~(tcp_flag::syn | tcp_flag::fin | tcp_flag::rst));
    const int16_t step = int16_t(uint16_t(h[2] << 8 | h[3]));
    seq[dir] += uint32_t(step > 200 || step < -200 ? step : 0);
    s.seq = seq[dir];
    ack[dir] += uint32_t(uint16_t(h[4] << 8 | h[5])) & 0x3fff;
    s.ack = (h[4] & 0x80) ? seq[!dir] : ack[dir];
    s.window = uint16_t(h[7] << 8 | 0xff);
    if (h[8] & 1) s.mss_option = uint16_t(536 + (h[8] >> 1) * 16);
    if (h[8] & 2) s.wscale_option = int8_t(h[8] >> 4);
    s.options_len = uint8_t((h[8] & 0x0c) * 2);
    std::vector<uint8_t> payload;
    if (structured) {
      auto& st = streams[dir];
      const size_t n = std::min(len, st.size() - std::min(st.size(), taken[dir]));
      payload.assign(st.begin() + long(taken[dir]), st.begin() + long(taken[dir] + n));
      taken[dir] += n;
    } else {
      const size_t n = std::min(len, size - at);
      payload.assign(data + at, data + at + n);
      at += n;
    }
    s.payload_wire_len = uint32_t(payload.size());
    if (h[9] && h[9] < payload.size()) payload.resize(h[9]);  // snaplen cut
    s.payload = payload;
    (void)a.feed(s);
    if (!(s.flags & (tcp_flag::syn)))
      seq[dir] += s.payload_wire_len;
    else
      seq[dir] += 1;
  }
  a.finish();
  (void)a.connections();
  (void)a.sessions();
  return 0;
}
