// SPDX-License-Identifier: GPL-2.0-or-later
#include "session/connection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "iscsi/pdu.hpp"
#include "session/delivery.hpp"
#include "session/constants.hpp"
#include "scsi/cdb.hpp"
#include "util/hex.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

namespace {
constexpr uint32_t kReservedTag = 0xffffffffu;
constexpr uint64_t kMaxNoticesPerConnection = 50;

std::string hex2(uint8_t v) {
  const char* d = "0123456789abcdef";
  return {d[v >> 4], d[v & 15]};
}

}  // namespace

Connection::Connection(uint32_t id, const Endpoint& initiator, const Endpoint& target, const Options& options,
                       Sink& sink, SessionRegistry& sessions)
    : id_(id),
      sessions_(sessions),
      initiator_(initiator),
      target_(target),
      options_(options),
      sink_(sink),
      tcp_(options.max_out_of_order_bytes),
      pdus_{PduStream(true), PduStream(false)} {
  login_.list_keys(false);
  tcp_.share_link(kI2T, sessions.path(initiator.addr, target.addr));
  tcp_.share_link(kT2I, sessions.path(target.addr, initiator.addr));
}

uint32_t Connection::session_id() const {
  if (session_) return session_;
  std::string key = login_done_ ? "login:" + initiator_name_ + "|" + isid_ + "|" + target_name_ + "|" +
                                      std::to_string(tsih_)
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
  if (rules_.retransmission.pending()) rules_.retransmission.settle(view(), *this, slots_, seg, dir);
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
    pdus_[dir].seed_digests(digest_seed_[dir].first, digest_seed_[dir].second);
  }
}

tcp::Delivery Connection::deliver(int dir, std::span<const uint8_t> bytes, uint32_t wire_len,
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
    // Once per connection: a capture taken with a snaplen cuts nearly every data packet.
    cap_notice(kCapSnaplen, seg.frame,
               "packets cut short by the capture's snaplen (first here: " + std::to_string(missing) +
                   " bytes of iSCSI data not captured): the capture holds headers only; PDU data "
                   "beyond the snaplen is not analysed, later cut packets are not reported",
               Notice::Level::warning);
  }
  if (tracer_)
    for (const PduEvent& ev : events) {
      // The framer locates a long PDU's first byte only while it is recent: its start says it.
      const bool start = ev.type == PduEvent::Type::start;
      if (start) trace_first_[dir] = ev.began_in_chunk ? seg.frame : ev.first_frame;
      const uint64_t last = start ? 0 : ev.last_frame ? ev.last_frame : seg.frame;
      tracer_->on_pdu({id_, dir == kI2T, ev.first_frame ? ev.first_frame : trace_first_[dir], last,
                       ev.bhs.opcode, ev.bhs.flags, ev.bhs.itt});
    }
  on_pdus(dir, seg, events, began_mid_pdu, mid_slot);
  for (auto& m : pdus_[dir].take_messages())
    notice(Notice::Level::warning, seg.frame, m);
  filling_ = outer;
  const uint32_t owner = current_pdu_slot_[dir];
  return {owner_cookie({owner, owner ? slots_[owner].r.first_frame : 0}), progress_cookie({seg_h_, seg_cmd_, seg_itt_})};
}

void Connection::lost(int dir, uint64_t bytes, uint64_t frame, const char* why) {
  auto& events = pdus_[dir].lose(bytes);
  if (current_pdu_slot_[dir] && slots_[current_pdu_slot_[dir]].used)
    slots_[current_pdu_slot_[dir]].r.data_incomplete = true;
  if (notices_ < kMaxNoticesPerConnection)
    notice(Notice::Level::warning, frame,
           std::to_string(bytes) + " bytes missing from the " + std::string(side_name(side_of(dir))) +
               "'s stream (" + why + ")");
  // A PDU whose last bytes were lost ends here: a status header in the capture completes its
  // command, timed at the header's segment (docs/rules.md "Commands").
  if (!events.empty()) {
    Segment s{};
    s.frame = tcp_.flow(dir).last_data_frame;
    s.time_ns = tcp_.flow(dir).last_data_t;
    std::vector<PduEvent> ended = std::move(events);
    on_pdus(dir, s, ended, false, 0);
  }
  for (auto& m : pdus_[dir].take_messages())
    notice(Notice::Level::warning, frame, m);
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

// The tracker's resends and filled holes are the retransmission rule's.
void Connection::hole_filled(int dir, const Segment& seg, int64_t since) {
  const uint32_t slot = current_pdu_slot_[dir];
  rules_.retransmission.hole_filled(view(), *this, dir, seg, since,
                                    slot && slots_[slot].used ? &slots_[slot] : nullptr);
}

void Connection::resent(int dir, const Segment& seg, const tcp::SentSegment* original) {
  rules_.retransmission.resent(view(), *this, slots_, dir, seg, original);
}

// ---------------------------------------------------------------------------------------------
// iSCSI PDUs and commands

// Off the ITT table, the open list and the PDU owners: answered (settling) or gone.
void Connection::retire(uint32_t slot) {
  if (slots_[slot].settling) return;  // retired when it completed
  slots_.retire(slot);
  for (int d = 0; d < 2; ++d)
    if (current_pdu_slot_[d] == slot) current_pdu_slot_[d] = 0;
}

void Connection::release_slot(uint32_t slot) {
  retire(slot);
  slots_.release(slot);
}

void Connection::on_pdu_end(int dir, const Segment& seg, const PduEvent& ev) {
  const iscsi::Bhs& b = ev.bhs;
  const iscsi::Opcode op = b.op();
  if (ev.header_digest_bad || ev.data_digest_bad) ++digest_errors_;
  if (op == iscsi::Opcode::LoginRequest || op == iscsi::Opcode::LoginResponse ||
      op == iscsi::Opcode::TextRequest || op == iscsi::Opcode::TextResponse) {
    on_login(dir, ev, seg);
    return;
  }
  if (op == iscsi::Opcode::Reject) {
    notice(Notice::Level::warning, seg.frame,
           "target rejected a PDU (reason 0x" + hex2(b.byte2) + ")");  // Reject reason
    return;
  }
  if (op == iscsi::Opcode::TaskMgmtRequest && dir == kI2T) {
    TaskManagement::Referenced ref;
    if (uint32_t s = b.referenced_task_tag() == kReservedTag ? 0 : slots_.find(b.referenced_task_tag())) {
      ref.open = true;
      ref.op = slots_[s].r.op;
      ref.first_ns = slots_[s].r.first_ns;
    }
    tmf_.on_request(b, ev.first_frame ? ev.first_frame : seg.frame, ev.first_frame ? ev.first_t : seg.time_ns, ref);
    return;
  }
  if (op == iscsi::Opcode::TaskMgmtResponse) {
    for (Notice& n : tmf_.on_response(b, seg.frame, seg.time_ns))
      notice(n.level, n.frame, std::move(n.message));
    return;
  }
  if (op == iscsi::Opcode::LogoutResponse) return;
  uint32_t slot = (b.itt == kReservedTag) ? 0 : slots_.find(b.itt);
  if (!slot) {
    // A reply may be framed before its command when the initiator's stream is still waiting
    // on a digest probe after a mid-stream start: keep it until the command shows up.
    bool reply = op == iscsi::Opcode::DataIn || op == iscsi::Opcode::ScsiResponse || op == iscsi::Opcode::R2T;
    if (reply && dir == kT2I && b.itt != kReservedTag && !replaying_) {
      if (orphans_.size() >= kMaxOrphans) {
        cap_notice(kCapOrphans, seg.frame,
                   "orphan-reply cap (" + std::to_string(kMaxOrphans) +
                       ") hit: replies whose command was not seen are dropped, oldest first (first: ITT " +
                       hex_itt(orphans_.front().event.bhs.itt) + ", frame " +
                       std::to_string(orphans_.front().frame) + ")");
        orphans_.erase(orphans_.begin());
      }
      orphans_.push_back(
          {ev, ev.last_frame ? ev.last_frame : seg.frame, ev.last_frame ? ev.last_t : seg.time_ns});
    }
    return;
  }
  OpenCommand& c = slots_[slot];
  if (ev.data_incomplete) c.r.data_incomplete = true;
  // A reply framed before its command (replayed), or before any segment of the answer counted.
  if (dir == kT2I && (!c.has_seg[kT2I] || replaying_) &&
      (op == iscsi::Opcode::DataIn || op == iscsi::Opcode::ScsiResponse || op == iscsi::Opcode::R2T))
    late_reply_events(slot, seg, ev);
  switch (op) {
    case iscsi::Opcode::ScsiCommand:
      c.needed_t = ev.last_frame ? ev.last_t : seg.time_ns;  // framing may complete later
      replay_orphans(b.itt);
      return;
    case iscsi::Opcode::DataOut:
      if (b.final())  // F: end of this burst; the target can act on it
        c.needed_t = ev.last_frame ? ev.last_t : seg.time_ns;
      break;
    case iscsi::Opcode::R2T:
      ++c.r2ts;
      if (!c.first_r2t_frame) c.first_r2t_frame = seg.frame;
      c.last_r2t_t = seg.time_ns;
      c.h_at_r2t = c.h_target;
      break;
    case iscsi::Opcode::DataIn:
      if (b.status_bit()) {  // S: status travels in this Data-In ("phase collapse")
        c.r.scsi_status = b.status();
        complete(slot, seg, ev);
      }
      break;
    case iscsi::Opcode::ScsiResponse:
      c.r.iscsi_response = b.response();
      c.r.scsi_status = b.status();
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
  // Its PDU in progress in a stream whose acknowledged bytes the capture has not shown (their gap
  // is declared later: tcp/tracker.cpp): that data is missing.
  for (int d = 0; d < 2; ++d) {
    const tcp::Flow& f = tcp_.flow(d);
    if (current_pdu_slot_[d] == slot && f.unseen_upto > f.next) c.r.data_incomplete = true;
  }
  // Answered; reported once the initiator acknowledges the status (settle), in status order.
  retire(slot);
  c.settling = true;
  // Near the initiator a segment lost after the capture point cannot precede the status (the
  // initiator's stream would have a hole): no need to wait.
  const bool near_initiator = tcp_.rtt(kI2T).known() && tcp_.rtt(kT2I).known() &&
                              rtt_ns(kI2T) * session::near_initiator_rtt_factor < full_rtt_ns();
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
    if (!all && !acked && now - c.r.status_ns < to_ns(session::settle_max_ms)) break;
    settling_.pop_front();
    emit_command(c);
    release_slot(slot);
  }
}

// How many commands were in flight together with c, by capture time: framing may lag one
// direction (a digest probe after a mid-session join) and see commands that followed each
// other as overlapping.
uint32_t Connection::in_flight_with(const OpenCommand& c) const {
  if (slots_.open_count() > kCountedInFlight) return uint32_t(slots_.open_count());
  const int64_t end = c.r.completed ? c.r.status_ns : INT64_MAX;
  uint32_t n = 1;
  for (uint32_t s : slots_.open_slots())
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
    rules_.judge_command(view(), *this, c, max_outstanding_ <= 1, latest_status_ns_);
    latest_status_ns_ = std::max(latest_status_ns_, r.status_ns);
  }
  rules_.give_held_findings(view(), *this, c);  // an open command's (a no-op once given)
  r.initiator_offset_ms = initiator_offset_now_ms();
  sink_.on_command(r);
}

void Connection::on_login(int dir, const PduEvent& ev, const Segment& seg) {
  (void)dir;
  const iscsi::Bhs& b = ev.bhs;
  bool login = b.op() == iscsi::Opcode::LoginRequest || b.op() == iscsi::Opcode::LoginResponse;
  if (login) {
    saw_login_ = true;
    char buf[16];
    std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(b.isid()));
    isid_ = buf;
    if (b.op() == iscsi::Opcode::LoginResponse) tsih_ = b.tsih();
  }
  if (ev.data_incomplete) login_cut_ = true;
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
  if (login_cut_) {
    // Keys read from a cut text would be half the negotiation and RFC defaults for the rest:
    // they are inferred from the PDUs instead, as for a capture joined mid-session, and digests
    // detected (docs/rules.md "Inferred facts").
    keys_.login_cut = true;
    initiator_name_ = k.initiator_name.value;
    target_name_ = k.target_name.value;
    session_type_ = k.session_type.value;
    session_id();
    return;
  }
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
  pdus_[kI2T].set_digests(header_digest_, data_digest_,
                          std::max(bound, k.target_max_recv_data_segment.value));
  pdus_[kT2I].set_digests(header_digest_, data_digest_,
                          std::max(bound, k.initiator_max_recv_data_segment.value));
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

void Connection::emit_finding(Finding f) {
  // What the verdict rests on that the capture may not have shown: a hold is told from a full
  // segment by the sender's MSS, a receive-window stall by the window scale, and an avoidable R2T
  // by the negotiated keys (docs/rules.md "Inferred facts").
  const int sender = f.kind == FindingKind::delayed_ack ? (f.side == Side::initiator ? kT2I : kI2T)
                                                        : (f.side == Side::initiator ? kI2T : kT2I);
  switch (f.kind) {
    case FindingKind::nagle_hold:
    case FindingKind::delayed_ack:
    case FindingKind::cwnd_limited:
    case FindingKind::rwnd_limited:
      if (!tcp_.flow(sender).mss_from_syn) f.inferred.emplace_back("mss");
      if (f.kind == FindingKind::rwnd_limited && !tcp_.flow(sender).peer_wscale_known)
        f.inferred.emplace_back("window_scale");
      break;
    case FindingKind::r2t_round_trip:
      if (!keys_.from_login) f.inferred.emplace_back("keys");
      break;
    default:
      break;
  }
  sink_.on_finding(f);
}

void Connection::notice(Notice::Level level, uint64_t frame, std::string message) {
  if (++notices_ > kMaxNoticesPerConnection) {
    if (notices_ == kMaxNoticesPerConnection + 1)
      sink_.on_notice({Notice::Level::info, frame, id_, "further notices for this connection suppressed"});
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
  if (rules_.retransmission.pending()) rules_.retransmission.settle(view(), *this, slots_, Segment{}, 0, true);
  tcp_.finish(*this);
  for (int d = 0; d < 2; ++d) {
    Segment s{};
    s.frame = tcp_.flow(d).last_data_frame;
    s.time_ns = tcp_.flow(d).last_data_t;
    pdus_[d].finish();
    std::vector<PduEvent> events = std::move(pdus_[d].events());
    on_pdus(d, s, events, false, 0);
    for (auto& m : pdus_[d].take_messages())
      notice(Notice::Level::info, s.frame, m);
  }
  settle(0, true);
  for (Notice& n : tmf_.finish())
    notice(n.level, n.frame, std::move(n.message));
  uint64_t unanswered = 0;
  const OpenCommand* first = nullptr;
  for (uint32_t s = 1; s < slots_.end(); ++s)
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
  for (uint32_t s = 1; s < slots_.end(); ++s)
    if (slots_[s].used) {
      emit_command(slots_[s]);
      release_slot(s);
    }
  rules_.finish(*this, max_outstanding_, first_command_frame_);
  sink_.on_connection(info());
}

}  // namespace iscsi_doctor::session
