// SPDX-License-Identifier: GPL-2.0-or-later
#include "session/pdu_stream.hpp"

#include <tuple>
#include <utility>

namespace iscsi_doctor::session {

namespace {
// A PDU header never spans more than a few segments; a long tail of them covers AHS too.
constexpr size_t kRecentChunks = 64;
}  // namespace

std::vector<PduEvent>& PduStream::feed(std::span<const uint8_t> bytes, uint64_t frame, int64_t t) {
  events_.clear();
  cur_frame_ = frame;
  cur_t_ = t;
  recent_.push_back({abs_, frame, t});
  if (recent_.size() > kRecentChunks) recent_.pop_front();
  framer_.feed(bytes, *this);
  abs_ += bytes.size();
  return events_;
}

void PduStream::gap(uint64_t lost_bytes) {
  framer_.gap(lost_bytes, *this);
  abs_ += lost_bytes;
  recent_.push_back({abs_, 0, 0});  // bytes from here on come from later segments
  if (recent_.size() > kRecentChunks) recent_.pop_front();
}

void PduStream::finish() {
  events_.clear();
  framer_.finish(*this);
}

void PduStream::set_digests(bool header, bool data, uint32_t max_data_segment) {
  iscsi::FramerConfig c = framer_.config();
  c.header_digest = header;
  c.data_digest = data;
  c.max_data_segment = max_data_segment;
  c.digests_known = true;
  framer_.set_config(c);
}

std::pair<uint64_t, int64_t> PduStream::locate(const iscsi::Position& p) const {
  if (p.in_this_chunk) return {cur_frame_, cur_t_};
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
    if (it->abs <= p.stream_offset) return {it->frame, it->t};
  return {0, 0};
}

void PduStream::on_pdu_start(const iscsi::PduStart& s) {
  PduEvent& ev = events_.emplace_back();
  ev.type = PduEvent::Type::start;
  ev.bhs = s.bhs;
  ev.began_in_chunk = s.first_byte.in_this_chunk;
  std::tie(ev.first_frame, ev.first_t) = locate(s.first_byte);
  ev.header_digest_bad = s.header_digest == iscsi::DigestCheck::bad;
  open_ = true;
}

void PduStream::on_pdu_end(const iscsi::PduEnd& e) {
  PduEvent& ev = events_.emplace_back();
  ev.type = PduEvent::Type::end;
  ev.bhs = e.bhs;
  ev.began_in_chunk = e.first_byte.in_this_chunk;
  std::tie(ev.first_frame, ev.first_t) = locate(e.first_byte);
  std::tie(ev.last_frame, ev.last_t) = locate(e.last_byte);
  ev.kept_truncated = e.kept_truncated;
  ev.data.assign(e.kept_data.begin(), e.kept_data.end());
  ev.data_incomplete = e.data_incomplete;
  ev.truncated = e.truncated;
  ev.header_digest_bad = e.header_digest == iscsi::DigestCheck::bad;
  ev.data_digest_bad = e.data_digest == iscsi::DigestCheck::bad;
  open_ = false;
  if (ev.header_digest_bad || ev.data_digest_bad)
    messages_.push_back(std::string(ev.header_digest_bad ? "header" : "data") + " digest mismatch on a " +
                        iscsi::opcode_name(e.bhs.opcode) + " PDU");
}

void PduStream::on_sync_lost(const iscsi::SyncLost& s) {
  open_ = false;
  messages_.push_back(std::string("iSCSI framing lost: ") + s.why + "; searching for the next PDU header");
}

void PduStream::on_resync(const iscsi::Resync& r) {
  if (r.bytes_skipped == 0) return;  // a mid-stream start that happened to begin on a PDU
  messages_.push_back("iSCSI framing found again after skipping " + std::to_string(r.bytes_skipped) +
                      " bytes");
}

}  // namespace iscsi_doctor::session
