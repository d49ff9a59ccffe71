// SPDX-License-Identifier: GPL-2.0-or-later
// A connection's facts (ConnectionInfo): its endpoints, handshake, MSS and window scale, round
// trips and vantage point, the link's rate, the negotiated keys, and its counts.
#include <algorithm>
#include <string>

#include "session/connection.hpp"
#include "session/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

Vantage Connection::vantage_now() const {
  const tcp::RttEstimate &ri = tcp_.rtt(kI2T), &rt = tcp_.rtt(kT2I);
  if (!ri.known() || !rt.known()) return Vantage::unknown;
  const double share = full_rtt_ns() > 0 ? double(ri.ns()) / double(full_rtt_ns()) : 0.5;
  if (full_rtt_ns() < to_ns(session::vantage_min_rtt_ms)) return Vantage::unknown;  // too close to call
  // A round trip known only as an upper bound may be any shorter (docs/rules.md "Measures taken
  // from TCP"): the capture point is near the other side only if that side's own round trip is too
  // short to matter (mid-path says no more than that it lies between).
  const int64_t tiny = to_ns(session::vantage_min_rtt_ms);
  if (share < session::vantage_initiator_share)
    return !rt.upper_bound_only() || ri.ns() < tiny ? Vantage::initiator : Vantage::unknown;
  if (share > session::vantage_target_share)
    return !ri.upper_bound_only() || rt.ns() < tiny ? Vantage::target : Vantage::unknown;
  // Between them only if neither side's bound may hold its own time: then that side may be the near one.
  const int64_t late = to_ns(options_.delayed_ack_min_ms);
  auto may_be_near = [&](const tcp::RttEstimate& r) { return r.ns() >= tiny && r.may_hold_side_time(late); };
  return may_be_near(ri) || may_be_near(rt) ? Vantage::unknown : Vantage::midpath;
}

double Connection::initiator_offset_now_ms() const {
  if (vantage_now() == Vantage::initiator) return 0;
  return tcp_.rtt(kI2T).known() ? ms(tcp_.rtt(kI2T).ns()) : -1;
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
  i.mss_source_initiator = tcp_.flow(kI2T).mss_source();
  i.mss_source_target = tcp_.flow(kT2I).mss_source();
  // the initiator's windows limit the target's sending (kept with the target's flow), and back
  const tcp::Flow &fi = tcp_.flow(kI2T), &ft = tcp_.flow(kT2I);
  i.wscale_initiator = ft.peer_wscale(fi.wscale_offered, ft.wscale_offered);
  i.wscale_target = fi.peer_wscale(ft.wscale_offered, fi.wscale_offered);
  i.wscale_inferred = !fi.peer_wscale_known || !ft.peer_wscale_known;
  i.offload_segments = fi.aggregates + ft.aggregates;
  i.nagle_off_frame_initiator = fi.nagle_off_frame;
  i.nagle_off_frame_target = ft.nagle_off_frame;
  if (tcp_.rtt(kI2T).known()) i.rtt_initiator_ms = ms(tcp_.rtt(kI2T).ns());
  if (tcp_.rtt(kT2I).known()) i.rtt_target_ms = ms(tcp_.rtt(kT2I).ns());
  i.rtt_source_initiator = tcp_.rtt(kI2T).source();
  i.rtt_source_target = tcp_.rtt(kT2I).source();
  const int64_t late = to_ns(options_.delayed_ack_min_ms);
  i.rtt_target_may_hold_own_time = tcp_.rtt(kT2I).may_hold_side_time(late);
  i.rtt_initiator_may_hold_own_time = tcp_.rtt(kI2T).may_hold_side_time(late);
  for (int d = 0; d < 2; ++d) {
    const tcp::LinkMeter& m = tcp_.flow(d).link;
    if (m.rate <= 0) continue;
    (d == kI2T ? i.rate_to_target_mbit_s : i.rate_to_initiator_mbit_s) = m.rate * 8 / 1e6;
    (d == kI2T ? i.rate_to_target_bytes : i.rate_to_initiator_bytes) = m.rate_bytes;
  }
  if (tcp_.rtt(kI2T).known() && tcp_.rtt(kT2I).known()) i.rtt_ms = ms(full_rtt_ns());
  i.vantage = vantage_now();
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
            {"source", keys_.from_login   ? "login"
                       : keys_.login_cut  ? "login cut short"
                       : keys_.initial_r2t_inferred ? "inferred"
                                                    : "default"}};
  i.header_digest = header_digest_ || pdus_[kI2T].header_digest_on();
  i.data_digest = data_digest_ || pdus_[kI2T].data_digest_on();
  i.frames = frames_;
  i.pdus = pdus_[0].pdus() + pdus_[1].pdus();
  i.commands = commands_;
  i.resyncs = pdus_[0].resyncs() + pdus_[1].resyncs();
  i.digest_errors = digest_errors_;
  i.bytes_missing = tcp_.flow(0).bytes_missing + tcp_.flow(1).bytes_missing;
  i.max_outstanding = max_outstanding_;
  i.never_answered = commands_ - std::min(completed_, commands_);
  return i;
}

}  // namespace iscsi_doctor::session
