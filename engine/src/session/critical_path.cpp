// SPDX-License-Identifier: GPL-2.0-or-later
// The critical path (docs/rules.md "The critical path"): each segment carrying bytes of a command
// is an event of that command; the gap from its previous event splits into the network crossing
// and the rest, a rest long enough is a wait (a hold, think time, a delay), and half trips count
// the crossings on the way to the status.
#include <algorithm>
#include <cstdint>

#include "iscsi/pdu.hpp"
#include "session/constants.hpp"
#include "scsi/cdb.hpp"
#include "session/connection.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

namespace {
constexpr uint32_t kReservedTag = 0xffffffffu;
}  // namespace

void Connection::on_pdus(int dir, const Segment& seg, std::vector<PduEvent>& events, bool began_mid_pdu,
                         uint32_t mid_slot) {
  // Which commands this segment carries bytes of, and why each was sendable only now.
  PathEvent path[8];
  size_t n = 0;
  // Framing found late (a stream joined mid-session is framed once the next header confirms it):
  // a PDU carried by earlier segments is placed at those segments, with no hold judged on a
  // timeline that has moved on (docs/rules.md "The critical path").
  HoldVerdict none;
  none.reported = true;
  auto at = [&](uint64_t frame, int64_t t) {
    Segment s = seg;
    s.frame = frame;
    s.time_ns = t;
    return s;
  };
  if (began_mid_pdu && mid_slot && slots_[mid_slot].used) {
    const PduEvent* end =
        !events.empty() && events.front().type == PduEvent::Type::end ? &events.front() : nullptr;
    if (end && end->last_frame && end->last_frame != seg.frame)
      analyse_path_event(dir, at(end->last_frame, end->last_t), {mid_slot, PathEvent::Role::cont}, none);
    else
      path[n++] = {mid_slot, PathEvent::Role::cont};
  }
  for (size_t k = 0; k < events.size(); ++k) {
    const PduEvent& ev = events[k];
    if (ev.type != PduEvent::Type::start) continue;
    PathEvent::Role role = PathEvent::Role::cont;
    uint32_t slot = path_event_for_start(dir, ev, seg, role);
    current_pdu_slot_[dir] = slot;
    const bool response = ev.bhs.op() == iscsi::Opcode::ScsiResponse;
    if (slot && role != PathEvent::Role::start && ev.first_frame && ev.first_frame != seg.frame) {
      analyse_path_event(dir, at(ev.first_frame, ev.first_t), {slot, role, response}, none);
      const PduEvent* end =
          k + 1 < events.size() && events[k + 1].type == PduEvent::Type::end ? &events[k + 1] : nullptr;
      if (end && end->last_frame && end->last_t > ev.first_t)
        analyse_path_event(dir, at(end->last_frame, end->last_t), {slot, PathEvent::Role::cont, response},
                           none);
      continue;
    }
    if (slot && n < 8 && role != PathEvent::Role::start) {
      bool dup = false;
      for (size_t i = 0; i < n; ++i)
        dup |= path[i].slot == slot;
      if (!dup) path[n++] = {slot, role, response};
    }
  }
  HoldVerdict verdict;
  for (size_t i = 0; i < n; ++i)
    analyse_path_event(dir, seg, path[i], verdict);
  for (auto& ev : events)
    if (ev.type == PduEvent::Type::end) on_pdu_end(dir, seg, ev);
}

uint32_t Connection::path_event_for_start(int dir, const PduEvent& ev, const Segment& seg,
                                          PathEvent::Role& role) {
  const iscsi::Bhs& b = ev.bhs;
  const iscsi::Opcode op = b.op();
  if (dir == kI2T && op == iscsi::Opcode::ScsiCommand) {
    if (b.itt == kReservedTag) return 0;
    if (uint32_t old = slots_.find(b.itt)) {
      notice(Notice::Level::warning, seg.frame,
             "ITT " + std::to_string(b.itt) + " reused while its command was still open");
      emit_command(slots_[old]);
      release_slot(old);
    }
    if (slots_.itt_count() >= options_.max_open_commands) {
      ++untracked_commands_;
      cap_notice(kCapOpenCommands, seg.frame,
                 "open-command cap (" + std::to_string(options_.max_open_commands) +
                     ") hit: command not tracked, nor any later one while the cap is full",
                 Notice::Level::error);
      return 0;
    }
    const uint32_t slot = slots_.open(b.itt);
    OpenCommand& c = slots_[slot];
    c.r.session = session_id();
    c.r.connection = id_;
    c.r.cmdsn = b.cmdsn();
    c.r.iscsi_opcode = b.opcode;
    c.r.lun = b.lun_number();
    c.r.bytes = b.expected_length();
    c.r.first_frame = ev.first_frame ? ev.first_frame : seg.frame;
    c.r.first_ns = ev.first_frame ? ev.first_t : seg.time_ns;
    const bool w = b.write_bit();
    c.write = w;
    if (auto cdb = scsi::decode_cdb(std::span<const uint8_t>(b.cdb.data(), b.cdb.size()))) {
      c.r.op.assign(cdb->name);
      c.r.lba = cdb->is_read_write() ? cdb->lba : std::nullopt;
      c.r.kind = cdb->dir == scsi::Direction::read && cdb->lba    ? 'r'
                 : cdb->dir == scsi::Direction::write && cdb->lba ? 'w'
                                                                  : 'o';
    } else {
      c.r.op.assign("?");
    }
    if (keys_.from_login == false && w && b.data_length > 0) keys_.immediate_data = true;
    c.r.ideal_round_trips = keys_.ideal_round_trips(w, w ? b.expected_length() : 0);
    c.h_initiator = 1;
    const tcp::Flow& data_flow = tcp_.flow(w ? kI2T : kT2I);
    c.link_busy0 = data_flow.link_meter().busy_ns;
    c.link_bytes0 = data_flow.link.busy_bytes;
    if (tracer_) view().trace_path(kI2T, c.r.first_frame, c);
    c.last_event_t = c.r.first_ns;
    c.last_seg_t[kI2T] = seg.time_ns;
    c.has_seg[kI2T] = true;
    ++commands_;
    // Small counts are judged by capture time when commands complete (in_flight_with).
    const uint32_t open = uint32_t(slots_.open_count());
    if (open > kCountedInFlight) max_outstanding_ = std::max(max_outstanding_, open);
    if (!first_command_frame_) first_command_frame_ = c.r.first_frame;
    role = PathEvent::Role::start;
    return slot;
  }
  uint32_t slot = (b.itt == kReservedTag) ? 0 : slots_.find(b.itt);
  if (!slot) return 0;
  OpenCommand& c = slots_[slot];
  switch (op) {
    case iscsi::Opcode::DataOut:
      if (b.ttt() != kReservedTag) {  // solicited: answers an R2T
        role = c.solicited_data ? PathEvent::Role::cont : PathEvent::Role::solicited;
        c.solicited_data = true;
      } else {
        role = PathEvent::Role::cont;  // unsolicited: sent right behind the command
        if (keys_.initial_r2t && !keys_.from_login) {
          keys_.initial_r2t = false;  // seen on the wire, so InitialR2T=No is in effect
          keys_.initial_r2t_inferred = true;
        }
      }
      break;
    case iscsi::Opcode::R2T:
      role = PathEvent::Role::reply;
      c.solicited_data = false;
      break;
    case iscsi::Opcode::DataIn:
    case iscsi::Opcode::ScsiResponse:
      role = c.has_seg[kT2I] ? PathEvent::Role::cont : PathEvent::Role::reply;
      if (op == iscsi::Opcode::ScsiResponse && c.write && c.r2ts) role = PathEvent::Role::reply;
      break;
    default:
      return 0;
  }
  return slot;
}

void Connection::analyse_path_event(int dir, const Segment& seg, const PathEvent& t, HoldVerdict& verdict) {
  OpenCommand& c = slots_[t.slot];
  if (!c.used) return;
  int64_t now = seg.time_ns;
  int64_t rtt_side = rtt_ns(dir);  // capture point <-> this segment's sender
  int64_t ready;
  if (t.role == PathEvent::Role::cont) {
    ready = c.has_seg[dir] ? c.last_seg_t[dir] : c.last_event_t;
  } else if (t.role == PathEvent::Role::solicited) {
    ready = c.last_r2t_t + rtt_side;
  } else {
    ready = c.needed_t + rtt_side;
  }
  int64_t interval = std::max<int64_t>(0, now - c.last_event_t);
  int64_t crossing = std::clamp<int64_t>(ready - c.last_event_t, 0, interval);
  int64_t rest = interval - crossing;
  Breakdown& bd = c.r.breakdown;
  bool reply = t.role == PathEvent::Role::reply;
  bool solicited = t.role == PathEvent::Role::solicited;
  // Half trips: a reply or solicited data is one crossing after what it answers; a hold found
  // below adds the peer's ACK crossing and this segment's own crossing on top of that.
  if (reply) c.h_target = std::max(c.h_target, c.h_initiator + 1);
  if (solicited) c.h_initiator = std::max(c.h_initiator, c.h_at_r2t + 1);

  // The crossing part: the network between the capture point and the sender, and back.
  if (crossing > 0) {
    // Timed by pure ACKs as late as a delayed ACK: any part of it may be the target's own time.
    if (reply && tcp_.rtt(kT2I).bound_by_pure_acks() && ms(rtt_side) >= options_.delayed_ack_min_ms)
      c.unsure_ms += ms(crossing);
    if ((reply || solicited) && tcp_.rtt(dir).may_hold_side_time(to_ns(options_.delayed_ack_min_ms)))
      c.bound_ms += ms(crossing);
    if (solicited || (reply && c.r2ts > 0))
      bd.r2t_ms += ms(crossing);
    else
      bd.request_ms += ms(crossing);
  }

  const int64_t wait_min = wait_min_ns(full_rtt_ns());
  double loss = std::min(c.loss_pending_ms, ms(rest));
  if (loss > 0) {
    bd.loss_ms += loss;
    c.loss_pending_ms -= loss;
    rest -= int64_t(loss * 1e6);
  }
  // A wait: a hold when an ACK released it (rules/holds.cpp), its time on this path.
  if (rest > wait_min) rest = rules_.holds.on_wait(view(), *this, dir, seg, c, ready, rest, verdict);
  if (t.role == PathEvent::Role::cont && c.has_seg[dir] && !verdict.reported)  // no wait of its own judged
    rules_.holds.on_release(view(), dir, seg, c);
  if (rest > 0) {
    if (dir == kT2I && (reply || rest > wait_min))
      bd.think_ms += ms(rest);
    else if (solicited)
      bd.r2t_ms += ms(rest);
    else if (t.response)
      bd.response_ms += ms(rest);
    else if (dir == kI2T)
      bd.request_ms += ms(rest);
    else if (c.has_seg[kT2I])
      bd.data_ms += ms(rest);
    else
      bd.request_ms += ms(rest);
  }
  if (reply && !c.first_reply_frame) {
    c.first_reply_frame = seg.frame;
    c.link_busy_reply = tcp_.flow(c.write ? kI2T : kT2I).link_meter().busy_ns;
  }
  seg_h_ = dir == kI2T ? c.h_initiator : c.h_target;
  seg_cmd_ = c.r.first_frame;
  seg_itt_ = c.r.itt;
  if (tracer_) view().trace_path(dir, seg.frame, c);
  c.last_event_t = std::max(c.last_event_t, now);
  c.last_seg_t[dir] = now;
  c.has_seg[dir] = true;
}

void Connection::late_reply_events(uint32_t slot, const Segment& seg, const PduEvent& ev) {
  // The reply was framed before (or while) its command was: its time still counts on the
  // critical path, but no hold can be judged on a timeline that has moved on.
  HoldVerdict none;
  none.reported = true;
  const bool response = ev.bhs.op() == iscsi::Opcode::ScsiResponse;
  Segment first = seg, last = seg;
  if (ev.first_frame) {
    first.frame = ev.first_frame;
    first.time_ns = ev.first_t;
  }
  if (ev.last_frame) {
    last.frame = ev.last_frame;
    last.time_ns = ev.last_t;
  }
  const PathEvent::Role role = slots_[slot].has_seg[kT2I] ? PathEvent::Role::cont : PathEvent::Role::reply;
  analyse_path_event(kT2I, first, {slot, role, response}, none);
  if (last.time_ns > first.time_ns)
    analyse_path_event(kT2I, last, {slot, PathEvent::Role::cont, response}, none);
}

}  // namespace iscsi_doctor::session
