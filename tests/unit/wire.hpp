// SPDX-License-Identifier: GPL-2.0-or-later
// Hand-made iSCSI-over-TCP conversations for engine tests: a two-party wire with exact capture
// times, and the PDUs of reads and writes built with the project's own encoder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "iscsi/pdu_builder.hpp"
#include "iscsi_doctor/analyzer.hpp"

namespace wire {

using namespace iscsi_doctor;

constexpr int64_t kMs = 1'000'000;

struct Recorder : Sink {
  std::vector<CommandResult> commands;
  std::vector<Finding> findings;
  std::vector<ConnectionInfo> connections;
  std::vector<Notice> notices;
  void on_notice(const Notice& n) override { notices.push_back(n); }
  void on_command(const CommandResult& c) override { commands.push_back(c); }
  void on_finding(const Finding& f) override { findings.push_back(f); }
  void on_connection(const ConnectionInfo& c) override { connections.push_back(c); }
  bool has(FindingKind k, Side s) const {
    for (auto& f : findings)
      if (f.kind == k && f.side == s) return true;
    return false;
  }
};

// A two-party TCP conversation seen at one capture point; times in nanoseconds.
class Wire {
public:
  explicit Wire(Analyzer& a, uint16_t initiator_port = 40000) : a_(a) {
    ini_.addr = Address::ipv4(0x0a000001);
    ini_.port = initiator_port;
    tgt_.addr = Address::ipv4(0x0a000002);
    tgt_.port = 3260;
  }
  void handshake(int64_t t, int64_t rtt_target, int64_t rtt_initiator) {
    send(true, t, tcp_flag::syn, {}, 1460);
    send(false, t + rtt_target, tcp_flag::syn | tcp_flag::ack, {}, 1460);
    send(true, t + rtt_target + rtt_initiator, tcp_flag::ack, {});
  }
  // Sends bytes from one side cut into MSS-sized segments, all at time t.
  void data(bool from_initiator, int64_t t, const std::vector<uint8_t>& bytes, size_t mss = 1448) {
    for (size_t off = 0; off < bytes.size(); off += mss) {
      size_t n = std::min(mss, bytes.size() - off);
      std::vector<uint8_t> part(bytes.begin() + long(off), bytes.begin() + long(off + n));
      send(from_initiator, t, tcp_flag::ack | tcp_flag::psh, part);
    }
  }
  void ack(bool from_initiator, int64_t t) { send(from_initiator, t, tcp_flag::ack, {}); }
  // A FIN (with the ACK of what the peer sent); it takes one sequence number.
  void fin(bool from_initiator, int64_t t) {
    send(from_initiator, t, tcp_flag::fin | tcp_flag::ack, {});
    ++(from_initiator ? iseq_ : tseq_);
  }
  uint64_t frame() const { return frame_; }
  SegmentStatus status() const { return status_; }  // of the last segment sent
  uint16_t window = 65535;                          // advertised on later segments
  // TCP option bytes on every later segment (12 for timestamps).
  void options(uint8_t n) { options_len_ = n; }
  // Timestamps (RFC 7323) on every later segment: TSval the sender's millisecond clock (the capture
  // time), TSecr what echo() set for that side.
  void timestamps(bool on) { ts_ = on; }
  void echo(bool from_initiator, uint32_t tsecr) { echo_[from_initiator ? 0 : 1] = tsecr; }
  uint32_t next_seq(bool from_initiator) const { return from_initiator ? iseq_ : tseq_; }
  // Initial sequence number of one side: call before its SYN (its data starts at isn + 1) or, with
  // no handshake, before its first segment (its data starts at isn).
  void isn(bool from_initiator, uint32_t seq) { (from_initiator ? iseq_ : tseq_) = seq; }
  // A pure ACK with an explicit acknowledgment number (partial or duplicate ACKs).
  void ack_to(bool from_initiator, int64_t t, uint32_t ackno) {
    uint32_t& their = from_initiator ? tseq_ : iseq_;
    uint32_t keep = their;
    their = ackno;
    send(from_initiator, t, tcp_flag::ack, {});
    their = keep;
  }
  // Data whose ACK field acknowledges only up to ackno (the peer's later bytes not yet received).
  void data_acking(bool from_initiator, int64_t t, const std::vector<uint8_t>& bytes, uint32_t ackno) {
    uint32_t& their = from_initiator ? tseq_ : iseq_;
    uint32_t keep = their;
    their = ackno;
    data(from_initiator, t, bytes);
    their = keep;
  }
  // at() whose ACK field acknowledges only up to ackno.
  void at_acking(bool from_initiator, int64_t t, uint32_t seq, const std::vector<uint8_t>& payload,
                 uint32_t ackno) {
    uint32_t& their = from_initiator ? tseq_ : iseq_;
    uint32_t keep = their;
    their = ackno;
    at(from_initiator, t, seq, payload);
    their = keep;
  }
  // A pure ACK carrying a SACK block [left, right) (a D-SACK when below the ACK: RFC 2883).
  void ack_sack(bool from_initiator, int64_t t, uint32_t left, uint32_t right) {
    sack_left_ = left;
    sack_right_ = right;
    send(from_initiator, t, tcp_flag::ack, {});
    sack_left_ = sack_right_ = 0;
  }
  // Bytes the sender sent that the capture never saw.
  void skip(bool from_initiator, uint32_t n) { (from_initiator ? iseq_ : tseq_) += n; }
  // A segment at an explicit sequence number (reordering, overlap, retransmission); the
  // sender's next sequence number moves only forward.
  void at(bool from_initiator, int64_t t, uint32_t seq, const std::vector<uint8_t>& payload) {
    uint32_t& my = from_initiator ? iseq_ : tseq_;
    uint32_t keep = my;
    my = seq;
    send(from_initiator, t, tcp_flag::ack | tcp_flag::psh, payload);
    if (int32_t(keep - my) > 0) my = keep;
  }

  void send(bool from_initiator, int64_t t, uint8_t flags, const std::vector<uint8_t>& payload,
            uint16_t mss = 0) {
    Segment s;
    s.frame = ++frame_;
    s.time_ns = t;
    s.src = from_initiator ? ini_ : tgt_;
    s.dst = from_initiator ? tgt_ : ini_;
    uint32_t& my = from_initiator ? iseq_ : tseq_;
    uint32_t& their = from_initiator ? tseq_ : iseq_;
    s.seq = my;
    s.ack = their;
    s.flags = flags;
    s.window = window;
    s.mss_option = mss;
    s.options_len = options_len_;
    s.sack_left = sack_left_;
    s.sack_right = sack_right_;
    s.has_timestamps = ts_;
    s.tsval = uint32_t(t / kMs);
    s.tsecr = echo_[from_initiator ? 0 : 1];
    s.payload = payload;
    s.payload_wire_len = uint32_t(payload.size());
    status_ = a_.feed(s);
    my += uint32_t(payload.size()) + ((flags & tcp_flag::syn) ? 1 : 0);
  }

private:
  Analyzer& a_;
  Endpoint ini_, tgt_;
  uint32_t iseq_ = 0xfffff000u, tseq_ = 1000;  // initiator's sequence wraps mid-test
  uint64_t frame_ = 0;
  uint8_t options_len_ = 0;
  uint32_t sack_left_ = 0, sack_right_ = 0;
  bool ts_ = false;
  uint32_t echo_[2] = {0, 0};
  SegmentStatus status_ = SegmentStatus::ignored;
};

inline std::vector<uint8_t> read10(uint32_t itt, uint32_t bytes) {
  iscsi::Bhs b;
  b.opcode = 0x01;
  b.flags = 0x80 | 0x40;  // F, R
  b.itt = itt;
  b.w20 = bytes;
  b.w24 = itt;
  b.cdb = {0x28, 0, 0, 0, 0x10, 0, 0, 0, uint8_t(bytes / 512), 0};
  return iscsi::encode_pdu(b);
}

inline std::vector<uint8_t> write10(uint32_t itt, uint32_t bytes, uint32_t immediate) {
  iscsi::Bhs b;
  b.opcode = 0x01;
  b.flags = 0x80 | 0x20;  // F, W
  b.itt = itt;
  b.w20 = bytes;
  b.w24 = itt;
  b.cdb = {0x2a, 0, 0, 0, 0x20, 0, 0, uint8_t((bytes / 512) >> 8), uint8_t(bytes / 512), 0};
  std::vector<uint8_t> data(immediate, 0xab);
  return iscsi::encode_pdu(b, data);
}

inline std::vector<uint8_t> data_in(uint32_t itt, uint32_t bytes, bool with_status) {
  iscsi::Bhs b;
  b.opcode = 0x25;
  b.flags = 0x80 | (with_status ? 0x01 : 0);
  b.itt = itt;
  b.w20 = 0xffffffff;
  std::vector<uint8_t> data(bytes, 0);
  return iscsi::encode_pdu(b, data);
}

inline std::vector<uint8_t> r2t(uint32_t itt, uint32_t offset, uint32_t length) {
  iscsi::Bhs b;
  b.opcode = 0x31;
  b.flags = 0x80;
  b.itt = itt;
  b.w20 = 0x100 + itt;  // TTT
  b.w40 = offset;
  b.w44 = length;
  return iscsi::encode_pdu(b);
}

inline std::vector<uint8_t> data_out(uint32_t itt, uint32_t ttt, uint32_t offset, uint32_t length) {
  iscsi::Bhs b;
  b.opcode = 0x05;
  b.flags = 0x80;
  b.itt = itt;
  b.w20 = ttt;
  b.w40 = offset;
  std::vector<uint8_t> data(length, 0xcd);
  return iscsi::encode_pdu(b, data);
}

inline std::vector<uint8_t> response(uint32_t itt) {
  iscsi::Bhs b;
  b.opcode = 0x21;
  b.flags = 0x80;
  b.itt = itt;
  return iscsi::encode_pdu(b);
}

}  // namespace wire
