// SPDX-License-Identifier: GPL-2.0-or-later
#include "session/connection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "iscsi/pdu.hpp"
#include "rules/constants.hpp"
#include "scsi/cdb.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

namespace {
constexpr uint32_t kReservedTag = 0xffffffffu;
constexpr uint64_t kMaxNoticesPerConnection = 50;

std::string hex2(uint8_t v) {
  const char* d = "0123456789abcdef";
  return {d[v >> 4], d[v & 15]};
}


std::string hex_itt(uint32_t itt) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", itt);
  return b;
}
}  // namespace

Connection::Connection(uint32_t id, const Endpoint& initiator, const Endpoint& target,
                       const Options& options, Sink& sink, SessionRegistry& sessions)
    : id_(id), sessions_(sessions), initiator_(initiator), target_(target), options_(options),
      sink_(sink), tcp_(options.max_out_of_order_bytes), pdus_{PduStream(true), PduStream(false)} {
  slots_.resize(1);
}

uint32_t Connection::session_id() const {
  if (session_) return session_;
  std::string key = login_done_ ? "login:" + initiator_name_ + "|" + isid_ + "|" + target_name_ +
                                      "|" + std::to_string(tsih_)
                                : "connection:" + std::to_string(id_);
  session_ = sessions_.resolve(key);
  SessionInfo& s = sessions_.info(session_);
  s.connections.push_back(id_);
  if (login_done_) {
    s.initiator_name = initiator_name_;
    s.target_name = target_name_;
    s.session_type = session_type_;
    s.isid = isid_;
    s.tsih = tsih_;
  }
  return session_;
}

// ---------------------------------------------------------------------------------------------
// TCP: the tracker (tcp/tracker.cpp) tells what the streams carry; this is its receiver.

SegmentStatus Connection::on_segment(const Segment& seg, int dir) {
  ++frames_;
  last_t_ = seg.time_ns;
  SegmentStatus status = tcp_.on_segment(seg, dir, *this);
  if (!settling_.empty()) settle(seg.time_ns);
  return status;
}

void Connection::stream_from_syn(int dir) {
  // From the first byte on, a stream starts with Login PDUs, which never carry digests; the
  // login's keys say what comes after (RFC 7143 §13.1), so no detection is needed.
  pdus_[dir].set_digests(false, false);
}

void Connection::stream_without_syn(int dir, const Segment& seg) {
  // If the first bytes are a Login PDU, the capture began at the login (framed from here, no
  // digests until negotiated); otherwise it began mid-stream and framing resumes at a plausible BHS.
  if (starts_with_login(seg, dir)) {
    pdus_[dir].set_digests(false, false);
  } else {
    mid_session_ = true;
    pdus_[dir].start_unsynced();
  }
}

tcp::DeliveryTag Connection::deliver(int dir, std::span<const uint8_t> bytes, uint32_t wire_len,
                                     const Segment& seg, const Segment* filled_by) {
  const Segment* outer = filling_;
  filling_ = filled_by;
  seg_h_ = -1;
  seg_cmd_ = 0;
  seg_itt_ = 0;
  bool began_mid_pdu = pdus_[dir].mid_pdu();
  uint32_t mid_slot = began_mid_pdu ? current_pdu_slot_[dir] : 0;
  auto& events = pdus_[dir].feed(bytes, seg.frame, seg.time_ns);
  if (bytes.size() < wire_len) {
    // The capture's snaplen cut this packet: the bytes exist, we just cannot see them.
    uint64_t missing = wire_len - bytes.size();
    pdus_[dir].gap(missing);
    if (notices_ < kMaxNoticesPerConnection)
      notice(Notice::Level::warning, seg.frame,
             "packet cut short by the capture's snaplen: " + std::to_string(missing) +
                 " bytes of iSCSI data not captured");
  }
  on_pdus(dir, seg, events, began_mid_pdu, mid_slot);
  for (auto& m : pdus_[dir].take_messages()) notice(Notice::Level::warning, seg.frame, m);
  filling_ = outer;
  return {current_pdu_slot_[dir], seg_h_, seg_cmd_, seg_itt_};
}

void Connection::lost(int dir, uint64_t bytes, uint64_t frame, const char* why) {
  pdus_[dir].gap(bytes);
  if (current_pdu_slot_[dir] && slots_[current_pdu_slot_[dir]].used)
    slots_[current_pdu_slot_[dir]].r.data_incomplete = true;
  if (notices_ < kMaxNoticesPerConnection)
    notice(Notice::Level::warning, frame,
           std::to_string(bytes) + " bytes missing from the " + std::string(side_name(side_of(dir))) +
               "'s stream (" + why + ")");
  for (auto& m : pdus_[dir].take_messages()) notice(Notice::Level::warning, frame, m);
}

void Connection::unacked_cap_hit(int dir, uint64_t frame, size_t cap) {
  cap_notice(kCapUnacked, frame,
             "unacknowledged-segment cap (" + std::to_string(cap) + " per direction) hit: the " +
                 std::string(side_name(side_of(dir))) +
                 "'s further segments are not kept for ACK and retransmission timing until ACKs catch up");
}

bool Connection::starts_with_login(const Segment& seg, int dir) {
  if (seg.payload.size() < iscsi::kBhsLength) return false;
  uint8_t want = dir == kI2T ? uint8_t(iscsi::Opcode::LoginRequest) : uint8_t(iscsi::Opcode::LoginResponse);
  if ((seg.payload[0] & 0x3f) != want) return false;
  auto bhs = iscsi::parse_bhs(seg.payload);
  return bhs && iscsi::plausible_bhs(*bhs, dir == kI2T);
}

int64_t Connection::tolerance_ns() const {
  // Jitter allowance when matching a release to the ACK that caused it.
  return rules::ns(rules::release_tolerance_ms) + full_rtt_ns() / rules::release_tolerance_rtt_divisor;
}

// ---------------------------------------------------------------------------------------------
// iSCSI PDUs and commands

uint32_t Connection::find_slot(uint32_t itt) const {
  auto it = by_itt_.find(itt);
  return it == by_itt_.end() ? 0 : it->second;
}

// Off the ITT table, the open count and the PDU owners: answered (settling) or gone.
void Connection::retire(uint32_t slot) {
  OpenCommand& c = slots_[slot];
  if (c.settling) return;  // retired when it completed
  if (c.open_pos < open_slots_.size() && open_slots_[c.open_pos] == slot) {
    open_slots_[c.open_pos] = open_slots_.back();
    slots_[open_slots_.back()].open_pos = c.open_pos;
    open_slots_.pop_back();
  }
  auto it = by_itt_.find(c.r.itt);
  if (it != by_itt_.end() && it->second == slot) by_itt_.erase(it);
  for (int d = 0; d < 2; ++d)
    if (current_pdu_slot_[d] == slot) current_pdu_slot_[d] = 0;
  if (outstanding_) --outstanding_;
}

void Connection::release_slot(uint32_t slot) {
  retire(slot);
  slots_[slot] = OpenCommand{};
  free_slots_.push_back(slot);
}

void Connection::add_finding_kind(OpenCommand& c, FindingKind k) {
  if (std::find(c.r.findings.begin(), c.r.findings.end(), k) == c.r.findings.end())
    c.r.findings.push_back(k);
}

void Connection::on_pdus(int dir, const Segment& seg, std::vector<PduEvent>& events,
                         bool began_mid_pdu, uint32_t mid_slot) {
  // Which commands this segment carries bytes of, and why each was sendable only now.
  Touch touches[8];
  size_t n = 0;
  if (began_mid_pdu && mid_slot && slots_[mid_slot].used) touches[n++] = {mid_slot, Touch::Role::cont};
  for (auto& ev : events) {
    if (ev.type != PduEvent::Type::start) continue;
    Touch::Role role = Touch::Role::cont;
    uint32_t slot = touch_for_start(dir, ev, seg, role);
    current_pdu_slot_[dir] = slot;
    if (slot && n < 8 && role != Touch::Role::start) {
      bool dup = false;
      for (size_t i = 0; i < n; ++i) dup |= touches[i].slot == slot;
      if (!dup) touches[n++] = {slot, role, ev.bhs.opcode == uint8_t(iscsi::Opcode::ScsiResponse)};
    }
  }
  HoldVerdict verdict;
  for (size_t i = 0; i < n; ++i) analyse_touch(dir, seg, touches[i], verdict);
  for (auto& ev : events)
    if (ev.type == PduEvent::Type::end) on_pdu_end(dir, seg, ev);
}

uint32_t Connection::touch_for_start(int dir, const PduEvent& ev, const Segment& seg,
                                     Touch::Role& role) {
  const iscsi::Bhs& b = ev.bhs;
  auto op = static_cast<iscsi::Opcode>(b.opcode);
  if (dir == kI2T && op == iscsi::Opcode::ScsiCommand) {
    if (b.itt == kReservedTag) return 0;
    if (uint32_t old = find_slot(b.itt)) {
      notice(Notice::Level::warning, seg.frame,
             "ITT " + std::to_string(b.itt) + " reused while its command was still open");
      emit_command(slots_[old]);
      release_slot(old);
    }
    if (by_itt_.size() >= options_.max_open_commands) {
      ++untracked_commands_;
      cap_notice(kCapOpenCommands, seg.frame,
                 "open-command cap (" + std::to_string(options_.max_open_commands) +
                     ") hit: command not tracked, nor any later one while the cap is full",
                 Notice::Level::error);
      return 0;
    }
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = uint32_t(slots_.size());
      slots_.emplace_back();
    }
    OpenCommand& c = slots_[slot];
    c.used = true;
    c.open_pos = uint32_t(open_slots_.size());
    open_slots_.push_back(slot);
    c.r.session = session_id();
    c.r.connection = id_;
    c.r.itt = b.itt;
    c.r.cmdsn = b.w24;
    c.r.iscsi_opcode = b.opcode;
    c.r.bytes = b.w20;
    c.r.first_frame = ev.first_frame ? ev.first_frame : seg.frame;
    c.r.first_ns = ev.first_frame ? ev.first_t : seg.time_ns;
    bool w = (b.flags & 0x20) != 0, r = (b.flags & 0x40) != 0;
    c.write = w;
    if (auto cdb = scsi::decode_cdb(std::span<const uint8_t>(b.cdb.data(), b.cdb.size()))) {
      c.r.op = std::string(cdb->name);
      c.r.lba = cdb->is_read_write() ? cdb->lba : std::nullopt;
      c.r.kind = cdb->dir == scsi::Direction::read && cdb->lba ? 'r'
                 : cdb->dir == scsi::Direction::write && cdb->lba ? 'w'
                                                                 : 'o';
    } else {
      c.r.op = "?";
    }
    if (keys_.from_login == false && w && b.data_length > 0) keys_.immediate_data = true;
    c.unsolicited_expected = w ? std::min<uint32_t>(b.w20, keys_.initial_r2t ? 0 : keys_.first_burst)
                               : 0;
    c.r.ideal_round_trips = keys_.ideal_round_trips(w, w ? b.w20 : 0);
    (void)r;
    c.h_initiator = 1;
    c.last_event_t = c.r.first_ns;
    c.last_seg_t[kI2T] = seg.time_ns;
    c.has_seg[kI2T] = true;
    by_itt_[b.itt] = slot;
    ++commands_;
    ++outstanding_;
    // Small counts are judged by capture time when commands complete (in_flight_with).
    if (outstanding_ > kCountedInFlight) max_outstanding_ = std::max(max_outstanding_, outstanding_);
    if (!first_command_frame_) first_command_frame_ = c.r.first_frame;
    role = Touch::Role::start;
    return slot;
  }
  uint32_t slot = (b.itt == kReservedTag) ? 0 : find_slot(b.itt);
  if (!slot) return 0;
  OpenCommand& c = slots_[slot];
  switch (op) {
    case iscsi::Opcode::DataOut:
      if (b.w20 != kReservedTag) {
        role = c.solicited_data ? Touch::Role::cont : Touch::Role::solicited;
        c.solicited_data = true;
      } else {
        role = Touch::Role::cont;  // unsolicited: sent right behind the command
        if (keys_.initial_r2t && !keys_.from_login) {
          keys_.initial_r2t = false;  // seen on the wire, so InitialR2T=No is in effect
          keys_.initial_r2t_inferred = true;
        }
      }
      break;
    case iscsi::Opcode::R2T:
      role = Touch::Role::reply;
      c.solicited_data = false;
      break;
    case iscsi::Opcode::DataIn:
    case iscsi::Opcode::ScsiResponse:
      role = c.has_seg[kT2I] ? Touch::Role::cont : Touch::Role::reply;
      if (op == iscsi::Opcode::ScsiResponse && c.write && c.r2ts) role = Touch::Role::reply;
      break;
    default:
      return 0;
  }
  return slot;
}

void Connection::analyse_touch(int dir, const Segment& seg, const Touch& t, HoldVerdict& verdict) {
  OpenCommand& c = slots_[t.slot];
  if (!c.used) return;
  int64_t now = seg.time_ns;
  int64_t rtt_side = rtt_ns(dir);  // capture point <-> this segment's sender
  int64_t ready;
  if (t.role == Touch::Role::cont) {
    ready = c.has_seg[dir] ? c.last_seg_t[dir] : c.last_event_t;
  } else if (t.role == Touch::Role::solicited) {
    ready = c.last_r2t_t + rtt_side;
  } else {
    ready = c.needed_t + rtt_side;
  }
  int64_t interval = std::max<int64_t>(0, now - c.last_event_t);
  int64_t crossing = std::clamp<int64_t>(ready - c.last_event_t, 0, interval);
  int64_t rest = interval - crossing;
  Breakdown& bd = c.r.breakdown;
  bool reply = t.role == Touch::Role::reply;
  bool solicited = t.role == Touch::Role::solicited;
  // Half trips: a reply or solicited data is one crossing after what it answers; a hold found
  // below adds the peer's ACK crossing and this segment's own crossing on top of that.
  if (reply) c.h_target = std::max(c.h_target, c.h_initiator + 1);
  if (solicited) c.h_initiator = std::max(c.h_initiator, c.h_at_r2t + 1);

  // The crossing part: the network between the capture point and the sender, and back.
  if (crossing > 0) {
    if (solicited || (reply && c.r2ts > 0)) bd.r2t_ms += ms(crossing);
    else bd.request_ms += ms(crossing);
  }

  int64_t wait_min = std::max<int64_t>(rules::ns(rules::wait_min_ms), full_rtt_ns() / rules::wait_min_rtt_divisor);
  double loss = std::min(c.loss_pending_ms, ms(rest));
  if (loss > 0) {
    bd.loss_ms += loss;
    c.loss_pending_ms -= loss;
    rest -= int64_t(loss * 1e6);
  }
  if (rest > wait_min) {
    if (!verdict.reported) {
      verdict = classify_hold(dir, seg, ready);
      verdict.reported = true;
      if (verdict.held) report_hold(dir, seg, c, verdict, ms(rest));
    }
    if (verdict.held) {
      double held_ms = ms(rest);
      double dack = std::min(verdict.delayed_ack_ms, held_ms);
      bd.delayed_ack_ms += dack;
      (verdict.kind == FindingKind::nagle_hold ? bd.nagle_ms : bd.window_ms) += held_ms - dack;
      c.hold_ms += held_ms;
      add_finding_kind(c, verdict.kind);
      if (dack > 0) add_finding_kind(c, FindingKind::delayed_ack);
      // Two crossings after the data the releasing ACK acknowledged: that ACK's, and this one's.
      // (Data of another command says nothing of this one's progress: then on top of it.)
      int32_t& h = dir == kI2T ? c.h_initiator : c.h_target;
      h = verdict.release_h >= 0 && verdict.release_cmd == c.r.first_frame
              ? std::max(h, verdict.release_h + 2)
              : h + 2;
      rest = 0;
    }
  }
  if (rest > 0) {
    if (dir == kT2I && (reply || rest > wait_min)) bd.think_ms += ms(rest);
    else if (solicited) bd.r2t_ms += ms(rest);
    else if (t.response) bd.response_ms += ms(rest);
    else if (dir == kI2T) bd.request_ms += ms(rest);
    else if (c.has_seg[kT2I]) bd.data_ms += ms(rest);
    else bd.request_ms += ms(rest);
  }
  if (reply && !c.first_reply_frame) c.first_reply_frame = seg.frame;
  seg_h_ = dir == kI2T ? c.h_initiator : c.h_target;
  seg_cmd_ = c.r.first_frame;
  seg_itt_ = c.r.itt;
  c.last_event_t = std::max(c.last_event_t, now);
  c.last_seg_t[dir] = now;
  c.has_seg[dir] = true;
}

void Connection::on_pdu_end(int dir, const Segment& seg, const PduEvent& ev) {
  const iscsi::Bhs& b = ev.bhs;
  auto op = static_cast<iscsi::Opcode>(b.opcode);
  if (ev.header_digest_bad || ev.data_digest_bad) ++digest_errors_;
  if (op == iscsi::Opcode::LoginRequest || op == iscsi::Opcode::LoginResponse ||
      op == iscsi::Opcode::TextRequest || op == iscsi::Opcode::TextResponse) {
    on_login(dir, ev, seg);
    return;
  }
  if (op == iscsi::Opcode::Reject) {
    notice(Notice::Level::warning, seg.frame,
           "target rejected a PDU (reason 0x" + hex2(b.byte2) + ")");
    return;
  }
  if (op == iscsi::Opcode::TaskMgmtResponse || op == iscsi::Opcode::LogoutResponse) return;
  uint32_t slot = (b.itt == kReservedTag) ? 0 : find_slot(b.itt);
  if (!slot) {
    // A reply may be framed before its command when the initiator's stream is still waiting
    // on a digest probe after a mid-stream start: keep it until the command shows up.
    bool reply = op == iscsi::Opcode::DataIn || op == iscsi::Opcode::ScsiResponse ||
                 op == iscsi::Opcode::R2T;
    if (reply && dir == kT2I && b.itt != kReservedTag && !replaying_) {
      if (orphans_.size() >= kMaxOrphans) {
        cap_notice(kCapOrphans, seg.frame,
                   "orphan-reply cap (" + std::to_string(kMaxOrphans) +
                       ") hit: replies whose command was not seen are dropped, oldest first (first: ITT " +
                       hex_itt(orphans_.front().event.bhs.itt) + ", frame " + std::to_string(orphans_.front().frame) +
                       ")");
        orphans_.pop_front();
      }
      orphans_.push_back({ev, ev.last_frame ? ev.last_frame : seg.frame,
                          ev.last_frame ? ev.last_t : seg.time_ns});
    }
    return;
  }
  OpenCommand& c = slots_[slot];
  if (ev.data_incomplete) c.r.data_incomplete = true;
  if (dir == kT2I && !c.has_seg[kT2I] &&
      (op == iscsi::Opcode::DataIn || op == iscsi::Opcode::ScsiResponse || op == iscsi::Opcode::R2T))
    touch_late_reply(slot, seg, ev);
  switch (op) {
    case iscsi::Opcode::ScsiCommand:
      c.needed_t = ev.last_frame ? ev.last_t : seg.time_ns;  // framing may complete later
      if (b.data_length > 0) c.data_out_bytes += b.data_length;
      if (c.unsolicited_expected <= c.data_out_bytes) c.request_done = true;
      replay_orphans(b.itt);
      return;
    case iscsi::Opcode::DataOut:
      c.data_out_bytes += b.data_length;
      if (b.flags & 0x80) {  // F: end of this burst; the target can act on it
        c.needed_t = ev.last_frame ? ev.last_t : seg.time_ns;
        c.request_done = true;
      }
      break;
    case iscsi::Opcode::R2T:
      ++c.r2ts;
      if (!c.first_r2t_frame) c.first_r2t_frame = seg.frame;
      c.last_r2t_t = seg.time_ns;
      c.h_at_r2t = c.h_target;
      break;
    case iscsi::Opcode::DataIn:
      c.data_in_bytes += b.data_length;
      if (b.flags & 0x01) {  // S: status travels in this Data-In ("phase collapse")
        c.r.scsi_status = b.byte3;
        complete(slot, seg, ev);
      }
      break;
    case iscsi::Opcode::ScsiResponse:
      c.r.iscsi_response = b.byte2;
      c.r.scsi_status = b.byte3;
      if (auto sense = scsi::parse_iscsi_sense(ev.data)) {
        c.r.sense_key = sense->key;
        if (sense->has_asc) {
          c.r.asc = sense->asc;
          c.r.ascq = sense->ascq;
        }
      }
      complete(slot, seg, ev);
      break;
    default:
      break;
  }
}

void Connection::touch_late_reply(uint32_t slot, const Segment& seg, const PduEvent& ev) {
  // The reply was framed before (or while) its command was: its time still counts on the
  // critical path, but no hold can be judged on a timeline that has moved on.
  HoldVerdict none;
  none.reported = true;
  const bool response = ev.bhs.opcode == uint8_t(iscsi::Opcode::ScsiResponse);
  Segment first = seg, last = seg;
  if (ev.first_frame) {
    first.frame = ev.first_frame;
    first.time_ns = ev.first_t;
  }
  if (ev.last_frame) {
    last.frame = ev.last_frame;
    last.time_ns = ev.last_t;
  }
  analyse_touch(kT2I, first, {slot, Touch::Role::reply, response}, none);
  if (last.time_ns > first.time_ns) analyse_touch(kT2I, last, {slot, Touch::Role::cont, response}, none);
}

void Connection::replay_orphans(uint32_t itt) {
  // The command's orphans are taken out first and each is replayed once: one that still finds
  // no open command (a duplicate reply after the status) is dropped, never queued again, so the
  // work is bounded by the orphan cap whatever the capture repeats.
  if (orphans_.empty()) return;
  std::vector<Orphan> mine;
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    if (it->event.bhs.itt == itt) {
      mine.push_back(std::move(*it));
      it = orphans_.erase(it);
    } else {
      ++it;
    }
  }
  const bool outer = replaying_;
  replaying_ = true;
  for (size_t i = 0; i < mine.size(); ++i) {
    Segment s{};
    s.frame = mine[i].frame;
    s.time_ns = mine[i].t;
    on_pdu_end(kT2I, s, mine[i].event);
  }
  replaying_ = outer;
}

void Connection::complete(uint32_t slot, const Segment& seg, const PduEvent& ev) {
  OpenCommand& c = slots_[slot];
  c.r.completed = true;
  // The status frame is the segment with the PDU's last byte (earlier than this one while a
  // digest probe waited for following bytes).
  c.r.status_frame = ev.last_frame ? ev.last_frame : seg.frame;
  c.r.status_ns = ev.last_frame ? ev.last_t : seg.time_ns;
  if (filling_ && filling_->time_ns > c.r.status_ns) {  // the status waited for a hole to fill
    c.r.status_frame = filling_->frame;
    c.r.status_ns = filling_->time_ns;
  }
  // A status captured before its command (a reordered capture, or the command held out of order
  // past its answer) cannot be timed: it counts as seen with the command, not before it.
  c.r.status_frame = std::max(c.r.status_frame, c.r.first_frame);
  c.r.status_ns = std::max(c.r.status_ns, c.r.first_ns);
  // Answered; reported once the initiator acknowledges the status (settle), in status order.
  retire(slot);
  c.settling = true;
  // Near the initiator a segment lost after the capture point cannot precede the status (the
  // initiator's stream would have a hole): no need to wait.
  const bool near_initiator = tcp_.rtt(kI2T).known() && tcp_.rtt(kT2I).known() && rtt_ns(kI2T) * rules::near_initiator_rtt_factor < full_rtt_ns();
  c.settle_seq = near_initiator ? 0 : tcp_.flow(kT2I).next;
  settling_.push_back(slot);
  settle(seg.time_ns);
}

void Connection::settle(int64_t now, bool all) {
  const tcp::Flow& f = tcp_.flow(kT2I);
  while (!settling_.empty()) {
    uint32_t slot = settling_.front();
    OpenCommand& c = slots_[slot];
    bool acked = c.settle_seq == 0 || (f.una_known && f.una >= c.settle_seq);
    if (!all && !acked && now - c.r.status_ns < rules::ns(rules::settle_max_ms)) break;
    settling_.pop_front();
    emit_command(c);
    release_slot(slot);
  }
}

// How many commands were in flight together with c, by capture time: framing may lag one
// direction (a digest probe after a mid-session join) and see commands that followed each
// other as overlapping.
uint32_t Connection::in_flight_with(const OpenCommand& c) const {
  if (outstanding_ > kCountedInFlight) return outstanding_;
  const int64_t end = c.r.completed ? c.r.status_ns : INT64_MAX;
  uint32_t n = 1;
  for (uint32_t s : open_slots_)
    if (&slots_[s] != &c && slots_[s].r.first_ns < end) ++n;
  if (latest_status_ns_ > c.r.first_ns) ++n;  // a command completed earlier ended after c began
  return n;
}

void Connection::emit_command(OpenCommand& c) {
  CommandResult& r = c.r;
  max_outstanding_ = std::max(max_outstanding_, in_flight_with(c));
  if (r.completed) {
    r.latency_ms = ms(r.status_ns - r.first_ns);
    r.round_trips = std::max(1, (c.h_target + 1) / 2);
    ++completed_;
    judge_r2t_round_trip(c);
    judge_target_think(c);
    if (max_outstanding_ <= 1) count_serialized(c);
    latest_status_ns_ = std::max(latest_status_ns_, r.status_ns);
  }
  sink_.on_command(r);
}

void Connection::on_login(int dir, const PduEvent& ev, const Segment& seg) {
  (void)dir;
  const iscsi::Bhs& b = ev.bhs;
  bool login = b.opcode == uint8_t(iscsi::Opcode::LoginRequest) ||
               b.opcode == uint8_t(iscsi::Opcode::LoginResponse);
  if (login) {
    saw_login_ = true;
    char buf[16];
    std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(b.isid()));
    isid_ = buf;
    if (b.opcode == uint8_t(iscsi::Opcode::LoginResponse)) tsih_ = b.tsih();
  }
  login_.add_pdu(b, ev.data, ev.kept_truncated);
  const iscsi::Negotiated& k = login_.result();
  if (k.text_bytes_clipped)
    cap_notice(kCapLoginText, seg.frame,
               "login text cap (" + std::to_string(iscsi::kMaxPendingText) +
                   " bytes) hit: the rest of a continued (C bit) Login/Text sequence is not negotiated");
  if (k.keys_not_listed)
    cap_notice(kCapKeysSeen, seg.frame,
               "login key list cap (" + std::to_string(iscsi::kMaxKeysSeen) +
                   " keys) hit: further keys are applied but not recorded");
  if (k.failed && login)
    notice(Notice::Level::warning, seg.frame,
           "login failed: status class " + std::to_string(k.status_class) + ", detail " +
               std::to_string(k.status_detail));
  if (!k.complete || login_done_) return;
  login_done_ = true;
  keys_.immediate_data = k.immediate_data.value;
  keys_.initial_r2t = k.initial_r2t.value;
  keys_.first_burst = k.first_burst_length.value;
  keys_.max_burst = k.max_burst_length.value;
  keys_.target_mrdsl = k.target_max_recv_data_segment.value;
  keys_.initiator_mrdsl = k.initiator_max_recv_data_segment.value;
  keys_.max_outstanding_r2t = k.max_outstanding_r2t.value;
  keys_.from_login = true;
  header_digest_ = k.header_digest.value == iscsi::Digest::CRC32C;
  data_digest_ = k.data_digest.value == iscsi::Digest::CRC32C;
  // A corrupt DataSegmentLength (up to 16 MiB) would swallow the stream: bound it by what the
  // receiver declared, with headroom for later Text renegotiation.
  const uint32_t bound = std::max({k.max_burst_length.value, k.first_burst_length.value, 262144u});
  pdus_[kI2T].set_digests(header_digest_, data_digest_, std::max(bound, k.target_max_recv_data_segment.value));
  pdus_[kT2I].set_digests(header_digest_, data_digest_, std::max(bound, k.initiator_max_recv_data_segment.value));
  initiator_name_ = k.initiator_name.value;
  target_name_ = k.target_name.value;
  session_type_ = k.session_type.value;
  session_id();
}

Finding Connection::finding(FindingKind kind, Side side, uint64_t frame, double lost_ms,
                            const OpenCommand* c) {
  Finding f;
  f.kind = kind;
  f.side = side;
  f.session = session_id();
  f.connection = id_;
  f.frame = frame;
  f.lost_ms = lost_ms;
  if (c) {
    f.itt = c->r.itt;
    f.command_first_frame = c->r.first_frame;
  }
  return f;
}

void Connection::emit_finding(Finding f) { sink_.on_finding(f); }

void Connection::notice(Notice::Level level, uint64_t frame, std::string message) {
  if (++notices_ > kMaxNoticesPerConnection) {
    if (notices_ == kMaxNoticesPerConnection + 1)
      sink_.on_notice({Notice::Level::info, frame, id_,
                       "further notices for this connection suppressed"});
    return;
  }
  sink_.on_notice({level, frame, id_, std::move(message)});
}

void Connection::cap_notice(uint8_t cap, uint64_t frame, std::string message, Notice::Level level) {
  if (caps_reported_ & cap) return;
  caps_reported_ |= cap;
  sink_.on_notice({level, frame, id_, std::move(message)});
}

void Connection::finish() {
  tcp_.finish(*this);
  for (int d = 0; d < 2; ++d) {
    Segment s{};
    s.frame = tcp_.flow(d).last_data_frame;
    s.time_ns = tcp_.flow(d).last_data_t;
    pdus_[d].finish();
    std::vector<PduEvent> events = std::move(pdus_[d].events());
    on_pdus(d, s, events, false, 0);
    for (auto& m : pdus_[d].take_messages()) notice(Notice::Level::info, s.frame, m);
  }
  settle(0, true);
  uint64_t unanswered = 0;
  const OpenCommand* first = nullptr;
  for (uint32_t s = 1; s < slots_.size(); ++s)
    if (slots_[s].used) {
      ++unanswered;
      if (!first || slots_[s].r.first_frame < first->r.first_frame) first = &slots_[s];
    }
  if (first || untracked_commands_) {  // once per connection, outside the notice budget
    const uint64_t n = unanswered + untracked_commands_;
    std::string m = std::to_string(n) + (n == 1 ? " command" : " commands") +
                    " never answered by the end of the capture (";
    if (untracked_commands_)
      m += std::to_string(untracked_commands_) + " of them past the open-command cap, not tracked" +
           (first ? "; " : "");
    if (first) m += "first: ITT " + hex_itt(first->r.itt) + ", frame " + std::to_string(first->r.first_frame);
    sink_.on_notice({Notice::Level::info, first ? first->r.first_frame : 0, id_, m + ")"});
  }
  for (uint32_t s = 1; s < slots_.size(); ++s)
    if (slots_[s].used) {
      emit_command(slots_[s]);
      release_slot(s);
    }
  judge_serialized();
  sink_.on_connection(info());
}

ConnectionInfo Connection::info() const {
  ConnectionInfo i;
  i.id = id_;
  i.session = session_id();
  i.initiator = initiator_;
  i.target = target_;
  i.saw_handshake = tcp_.saw_syn();
  i.saw_login = saw_login_;
  i.mid_session_start = mid_session_;
  i.mss_initiator = uint16_t(std::min<uint32_t>(tcp_.flow(kI2T).effective_mss(), 65535));
  i.mss_target = uint16_t(std::min<uint32_t>(tcp_.flow(kT2I).effective_mss(), 65535));
  i.mss_inferred = !tcp_.flow(kI2T).mss_from_syn || !tcp_.flow(kT2I).mss_from_syn;
  if (tcp_.rtt(kI2T).known()) i.rtt_initiator_ms = ms(tcp_.rtt(kI2T).ns());
  if (tcp_.rtt(kT2I).known()) i.rtt_target_ms = ms(tcp_.rtt(kT2I).ns());
  if (tcp_.rtt(kI2T).known() && tcp_.rtt(kT2I).known()) {
    i.rtt_ms = ms(full_rtt_ns());
    double share = full_rtt_ns() > 0 ? double(tcp_.rtt(kI2T).ns()) / double(full_rtt_ns()) : 0.5;
    if (full_rtt_ns() < rules::ns(rules::vantage_min_rtt_ms)) i.vantage = Vantage::unknown;  // too close to call
    else if (share < rules::vantage_initiator_share) i.vantage = Vantage::initiator;
    else if (share > rules::vantage_target_share) i.vantage = Vantage::target;
    else i.vantage = Vantage::midpath;
  }
  auto b = [](bool v) { return std::string(v ? "Yes" : "No"); };
  i.keys = {{"ImmediateData", b(keys_.immediate_data)},
            {"InitialR2T", b(keys_.initial_r2t)},
            {"FirstBurstLength", std::to_string(keys_.first_burst)},
            {"MaxBurstLength", std::to_string(keys_.max_burst)},
            {"MaxRecvDataSegmentLength(target)", std::to_string(keys_.target_mrdsl)},
            {"MaxRecvDataSegmentLength(initiator)", std::to_string(keys_.initiator_mrdsl)},
            {"MaxOutstandingR2T", std::to_string(keys_.max_outstanding_r2t)},
            {"HeaderDigest", header_digest_ ? "CRC32C" : "None"},
            {"DataDigest", data_digest_ ? "CRC32C" : "None"},
            {"source", keys_.from_login ? "login" : (keys_.initial_r2t_inferred ? "inferred" : "default")}};
  i.header_digest = header_digest_ || pdus_[kI2T].header_digest_on();
  i.data_digest = data_digest_ || pdus_[kI2T].data_digest_on();
  i.frames = frames_;
  i.pdus = pdus_[0].pdus() + pdus_[1].pdus();
  i.commands = commands_;
  i.resyncs = pdus_[0].resyncs() + pdus_[1].resyncs();
  i.digest_errors = digest_errors_;
  i.bytes_missing = tcp_.flow(0).bytes_missing + tcp_.flow(1).bytes_missing;
  i.max_outstanding = max_outstanding_;
  return i;
}

}  // namespace iscsi_doctor::session
