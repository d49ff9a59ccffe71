// SPDX-License-Identifier: GPL-2.0-or-later
// link_limited (docs/rules.md "The link"): a command whose data kept the path busy for most of
// its time beyond the round trips it needs. That time is what the bytes need on the link, not a
// window, a delayed ACK, a Nagle hold or the target: the holds the link explains are not given.
#include "rules/link_limited.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>

#include "iscsi_doctor/finding_kinds.hpp"
#include "rules/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

namespace {
std::string mbit_words(double bytes_per_s) {
  char buf[32];
  const double mbit = bytes_per_s * 8 / 1e6;
  std::snprintf(buf, sizeof buf, mbit >= 100 ? "%.0f" : mbit >= 10 ? "%.1f" : "%.2f", mbit);
  return buf;
}

// The hold kinds: each one's own time is its breakdown part (finding_kinds.hpp).
constexpr FindingKind kHoldKinds[] = {FindingKind::nagle_hold, FindingKind::delayed_ack, FindingKind::cwnd_limited,
                                      FindingKind::rwnd_limited};
}  // namespace

void LinkLimited::judge(const ConnectionView& v, FindingOut& out, OpenCommand& c) const {
  CommandResult& r = c.r;
  if (r.bytes < link_command_bytes_min) return;  // too little data to keep a link busy
  const int d = c.write ? kI2T : kT2I;  // the data's direction
  const tcp::Flow& flow = v.flow(d);
  const tcp::LinkMeter& m = flow.link_meter();  // the link, whoever's data kept it busy
  const int64_t busy_ns = m.busy_ns - c.link_busy0;
  const double busy = ms(busy_ns), rtt = ms(v.full_rtt_ns());
  if (busy_ns <= 0 || rtt <= 0) return;
  // The link's time must be a large share of what the command needs at best (its round trips)
  // and of what it took beyond them: else the round trips or a window were the limit.
  const double k_rtt = r.ideal_round_trips * rtt;
  if (busy < link_share * k_rtt || busy < link_share * (r.latency_ms - k_rtt)) return;
  Breakdown& bd = r.breakdown;
  double left = busy;
  auto take = [&](double& part, double at_most = INFINITY) {
    const double x = std::min({part, left, at_most});
    part -= x;
    left -= x;
    bd.link_ms += x;
    return x;
  };
  take(bd.data_ms);
  const double w = take(bd.window_ms);
  const double wc = std::min(bd.cwnd_ms, w);
  bd.cwnd_ms -= wc;
  bd.rwnd_ms -= std::min(bd.rwnd_ms, w - wc);
  take(bd.delayed_ack_ms);
  take(bd.nagle_ms);
  take(bd.response_ms);
  if (!c.write && !v.near(kT2I) && c.link_busy_reply >= 0)
    // A read's first reply that came while the link was busy with other data (another
    // connection's, on a shared link) was queued behind it: not the target's time (where the
    // capture is at the target, its wait is).
    take(bd.think_ms, ms(c.link_busy_reply - c.link_busy0));
  if (c.write) {
    // A write's data reached the target only at the link's pace: the wait for the reply after it,
    // and the data's own arrival (at the target), are the link's.
    take(bd.think_ms);
    take(bd.request_ms);
  }
  if (bd.link_ms <= 0) return;
  // Holds the link explains added no round trip of their own: the data was clocked out by it.
  bool holds_left = false;
  for (FindingKind k : kHoldKinds) {
    if (exclusive_ms(k, bd) >= ms(v.wait_min_ns()))
      holds_left = true;
    else
      r.findings.erase(std::remove(r.findings.begin(), r.findings.end(), k), r.findings.end());
  }
  if (!holds_left) r.round_trips = std::max(1, (c.h_target - c.held_h + 1) / 2);
  // The command's data (its connection's) over the link's busy time: less than the link's rate
  // when other data shared it.
  const uint64_t bytes = flow.link.busy_bytes - c.link_bytes0;
  const double rate = double(bytes) * 1e9 / double(busy_ns);
  Finding f = out.finding(FindingKind::link_limited, Side::network, r.status_frame, bd.link_ms, &c);
  f.related.emplace_back("command", r.first_frame);
  f.detail = "the data moved at " + mbit_words(rate) + " Mbit/s, the link busy for " + whole_ms(busy) +
             " ms: the transfer is bound by the link's rate";
  if (m.rate > 0 && rate < link_shared_rate_share * m.rate)
    f.detail += " (the link has carried " + mbit_words(m.rate) + " Mbit/s: it is shared)";
  add_finding_kind(c, FindingKind::link_limited);
  out.emit_finding(std::move(f));
}

// The holds a command's segments waited on, given when the command is reported: those whose
// time the link explains (judge) are dropped, the others keep what is left of it.
void LinkLimited::give_held_findings(const ConnectionView& v, FindingOut& out, OpenCommand& c) const {
  if (c.held_findings.empty()) return;
  const Breakdown& bd = c.r.breakdown;
  const bool linked = bd.link_ms > 0;
  for (Finding& f : c.held_findings) {
    if (linked) {
      const double left = exclusive_ms(f.kind, bd);  // every held finding is a hold kind's
      if (left < ms(v.wait_min_ns())) continue;
      f.lost_ms = std::min(f.lost_ms, left);
    }
    out.emit_finding(std::move(f));
  }
  c.held_findings.clear();
}

}  // namespace iscsi_doctor::rules
