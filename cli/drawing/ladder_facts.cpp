// SPDX-License-Identifier: GPL-2.0-or-later
#include "drawing/ladder_facts.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "iscsi_doctor/finding_kinds.hpp"
#include "reports/formatting.hpp"

namespace iscsi_doctor::cli::ladder {

CapturePoint place_capture_point(const ConnectionInfo& k) {
  CapturePoint p;
  p.rtt_i = k.rtt_initiator_ms, p.rtt_t = k.rtt_target_ms;
  if (p.rtt_i < 0 || p.rtt_t < 0) {
    const double full = k.rtt_ms > 0 ? k.rtt_ms : 0;
    p.rtt_i = k.vantage == Vantage::initiator ? 0 : k.vantage == Vantage::target ? full : full / 2;
    p.rtt_t = full - p.rtt_i;
  }
  p.share = p.rtt_i + p.rtt_t > 0 ? std::clamp(p.rtt_i / (p.rtt_i + p.rtt_t), 0.0, 1.0) : 0.5;
  p.to_initiator_ns = int64_t(p.rtt_i * 1e6 / 2), p.to_target_ns = int64_t(p.rtt_t * 1e6 / 2);
  p.x = kInitiatorX + (kTargetX - kInitiatorX) * std::clamp(p.share, 0.03, 0.97);
  return p;
}

std::map<uint64_t, std::string> evidence_roles(const std::vector<Finding>& findings) {
  std::map<uint64_t, std::string> role;
  auto set_role = [&](uint64_t f, const char* name) {
    if (f) role.emplace(f, name);
  };
  for (const Finding& f : findings) {
    auto rel = [&](std::string_view n) -> uint64_t {
      for (const auto& [name, frame] : f.related)
        if (name == n) return frame;
      return 0;
    };
    switch (f.kind) {
      case FindingKind::nagle_hold:
      case FindingKind::cwnd_limited:
      case FindingKind::rwnd_limited:
        set_role(f.frame, "held"), set_role(rel("released_by"), "release"),
            set_role(rel("previous_small"), "small");
        break;
      case FindingKind::delayed_ack:
        set_role(f.frame, "release"), set_role(rel("released"), "held"), set_role(rel("acks"), "small");
        break;
      case FindingKind::retransmission:
        set_role(f.frame, "retransmission"), set_role(rel("original"), "original");
        break;
      default:
        break;
    }
  }
  return role;
}

std::vector<Arrow> make_arrows(const LadderRequest& r, const CapturePoint& cp) {
  const std::map<uint64_t, std::string> roles = evidence_roles(r.findings);
  auto role_of = [&](const LadderSeg& s) -> std::string {
    if (auto it = roles.find(s.frame); it != roles.end()) return it->second;
    if (s.retransmission) return "retransmission";
    if (s.len == 0) return "ack";
    return s.ours ? "command" : "other";
  };
  std::vector<Arrow> arrows;
  int64_t last_cap = std::numeric_limits<int64_t>::min();
  for (const LadderSeg& s : r.segs) {
    // Segments captured at the same time (or, across a clock step, earlier) a nanosecond apart:
    // each its own row.
    const int64_t cap = std::max(s.time_ns - r.command.first_ns,
                                 last_cap == std::numeric_limits<int64_t>::min() ? last_cap : last_cap + 1);
    last_cap = cap;
    Arrow a{&s, 0, cap, 0, role_of(s)};
    a.send = a.cap - (s.from_initiator ? cp.to_initiator_ns : cp.to_target_ns);
    a.arr = a.cap + (s.from_initiator ? cp.to_target_ns : cp.to_initiator_ns);
    arrows.push_back(std::move(a));
  }
  return arrows;
}

void number_round_trips(std::vector<Arrow>& arrows, const CommandResult& c) {
  int shown = 0;
  Arrow* status = nullptr;
  for (Arrow& a : arrows) {
    const LadderSeg& s = *a.s;
    if (c.status_frame && s.frame == c.status_frame) status = &a;
    if (s.half_trips < 0 || s.half_trips / 2 <= shown) continue;
    if (c.completed && s.half_trips / 2 > c.round_trips) continue;
    a.rt = shown = s.half_trips / 2;
  }
  if (status && shown < c.round_trips) status->rt = c.round_trips;
}

const char* wait_fill(std::string_view role) {
  if (role == "delayed-ack-wait") return "#ffe08a";
  if (role == "think") return "#d9ecd0";
  if (role == "loss-wait") return "#e6d3ef";
  return "#f9c9c9";  // hold-wait
}

std::vector<Shade> make_shades(const std::vector<Finding>& findings, const std::vector<Arrow>& arrows) {
  std::vector<Shade> shades;
  for (const Finding& f : findings) {
    const char* what = finding_kind(f.kind).label.data();
    if (!*what || f.lost_ms <= 0) continue;
    if (f.kind == FindingKind::target_think) {
      // The target's wait (#27 item 8): from a piece of the request reaching the target to the
      // reply that ended the longest such wait, from the evidence frame on (a write's think may
      // follow its last Data-Out, after the R2T the evidence names); never over an idle break or
      // an earlier command.
      const Arrow* best = nullptr;
      int64_t best_from = 0, best_gap = -1, request_arr = std::numeric_limits<int64_t>::min();
      for (const Arrow& a : arrows) {
        if (!a.s->ours || a.s->len == 0) continue;
        if (a.s->from_initiator) {
          request_arr = a.arr;
        } else if (a.s->frame >= f.frame && request_arr != std::numeric_limits<int64_t>::min() &&
                   a.send - request_arr > best_gap) {
          best = &a, best_gap = a.send - request_arr, best_from = request_arr;
        }
      }
      if (best) {
        const int64_t end = best->send;
        shades.push_back({false, std::max(best_from, end - int64_t(f.lost_ms * 1e6)), end,
                          fmt::format("{} {}", what, ms_text(f.lost_ms)), wait_fill("think"), "think"});
        continue;
      }
    }
    for (const Arrow& a : arrows)
      if (a.s->frame == f.frame) {
        const bool init = f.side == Side::initiator;
        const int64_t end = a.send;
        const char* shade_role = f.kind == FindingKind::delayed_ack      ? "delayed-ack-wait"
                                 : f.kind == FindingKind::target_think   ? "think"
                                 : f.kind == FindingKind::retransmission ? "loss-wait"
                                                                         : "hold-wait";
        // A wait of the drawn command starts after its first segment: never over the idle break or
        // an earlier command (a hold's time may add up several flights' waits).
        int64_t start = std::numeric_limits<int64_t>::min();
        for (const Arrow& b : arrows)
          if (b.s->ours) {
            start = b.send;
            break;
          }
        shades.push_back({init, std::max(start, end - int64_t(f.lost_ms * 1e6)), end,
                          fmt::format("{} {}", what, ms_text(f.lost_ms)), wait_fill(shade_role), shade_role});
        break;
      }
  }
  return shades;
}

}  // namespace iscsi_doctor::cli::ladder
