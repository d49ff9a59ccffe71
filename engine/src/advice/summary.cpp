// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi_doctor/summary.hpp"

#include <algorithm>
#include <cmath>

namespace iscsi_doctor {

namespace {
constexpr size_t kExamples = 5;
constexpr size_t kMaxNotices = 1000;

template <typename T>
double quantile(std::vector<T> v, double q) {
  if (v.empty()) return 0;
  size_t k = size_t(std::floor(q * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return double(v[k]);
}

double part_for(FindingKind k, const Breakdown& b) {
  switch (k) {
    case FindingKind::nagle_hold: return b.nagle_ms + b.delayed_ack_ms;  // no hold, no wait for the ACK
    case FindingKind::delayed_ack: return b.delayed_ack_ms;
    case FindingKind::r2t_round_trip: return b.r2t_ms;
    case FindingKind::cwnd_limited:
    case FindingKind::rwnd_limited: return b.window_ms;
    case FindingKind::retransmission: return b.loss_ms;
    case FindingKind::target_think: return b.think_ms;
    default: return 0;
  }
}

// Slowest first: most round trips beyond the ideal, then latency.
bool worse(const CommandResult& a, const CommandResult& b) {
  int ea = a.round_trips - a.ideal_round_trips, eb = b.round_trips - b.ideal_round_trips;
  if (ea != eb) return ea > eb;
  return a.latency_ms > b.latency_ms;
}
}  // namespace

std::string fix_for(FindingKind kind, Side side) {
  switch (kind) {
    case FindingKind::nagle_hold:
      return side == Side::target
                 ? "set TCP_NODELAY on the target's socket, or send the final Data-In and the SCSI "
                   "Response in one write (or put the status in the final Data-In, S bit)"
                 : "set TCP_NODELAY on the initiator's socket, or send the command header and its "
                   "immediate data in one write (writev/MSG_MORE)";
    case FindingKind::delayed_ack:
      return side == Side::initiator
                 ? "quick-ACK on the initiator (TCP_QUICKACK after each receive, or a lower "
                   "delayed-ACK timeout); removing the Nagle hold on the target removes the wait"
                 : "quick-ACK on the target (TCP_QUICKACK after each receive); removing the Nagle "
                   "hold on the initiator removes the wait";
    case FindingKind::r2t_round_trip:
      return "negotiate ImmediateData=Yes and InitialR2T=No, with FirstBurstLength at least the "
             "write size, so write data travels with the command";
    case FindingKind::cwnd_limited:
      return "keep the congestion window open between bursts: net.ipv4.tcp_slow_start_after_idle=0 "
             "on the sender, and a larger initial window (ip route ... initcwnd)";
    case FindingKind::rwnd_limited:
      return side == Side::target
                 ? "raise the initiator's receive buffer (net.ipv4.tcp_rmem, window scaling)"
                 : "raise the target's receive buffer (net.ipv4.tcp_rmem, window scaling)";
    case FindingKind::retransmission:
      return "find the loss on the path (interface errors, drops, duplex, MTU); losses cost a "
             "timeout or a round trip each";
    case FindingKind::target_think:
      return "the target itself is slow (backing store, CPU, locking): look at the target's disks "
             "and its own latency, not the network";
    case FindingKind::serialized:
      return "keep more commands outstanding (queue depth > 1: more I/O threads, async I/O, a "
             "larger nr_requests/queue depth) or larger transfers, so round trips overlap";
    default:
      return {};
  }
}

void Summary::on_command(const CommandResult& c) {
  ++commands_;
  if (!c.completed) return;
  ++completed_;
  if (c.round_trips > c.ideal_round_trips)
    excess_round_trips_ += uint64_t(c.round_trips - c.ideal_round_trips);
  auto& cls = classes_[{c.kind, c.bytes}];
  cls.latency.push_back(float(c.latency_ms));
  cls.round_trips.push_back(uint16_t(std::min(c.round_trips, 65535)));
  cls.ideal = c.ideal_round_trips;
  for (FindingKind k : c.findings) {
    auto& pk = kinds_[size_t(k)];
    ++pk.commands;
    pk.latency.push_back(float(c.latency_ms));
    pk.fixed.push_back(float(std::max(0.0, c.latency_ms - part_for(k, c.breakdown))));
  }
  if (worst_kept_) {
    if (worst_.size() < worst_kept_) {
      worst_.push_back(c);
      std::sort(worst_.begin(), worst_.end(), worse);
    } else if (worse(c, worst_.back())) {
      worst_.back() = c;
      std::sort(worst_.begin(), worst_.end(), worse);
    }
  }
}

void Summary::on_finding(const Finding& f) {
  auto& pk = kinds_[size_t(f.kind)];
  ++counts_[size_t(f.kind)];
  if (pk.occurrences == 0) pk.side = f.side;
  ++pk.occurrences;
  pk.lost_ms += f.lost_ms;
  if (pk.examples.size() < kExamples) pk.examples.push_back(f.frame);
}

void Summary::on_notice(const Notice& n) {
  if (notices_.size() < kMaxNotices) notices_.push_back(n);
  else ++notices_dropped_;
}

std::vector<Advice> Summary::advice() const {
  std::vector<Advice> out;
  for (size_t i = 0; i < finding_kind_count; ++i) {
    const auto& pk = kinds_[i];
    if (!pk.occurrences) continue;
    Advice a;
    a.kind = FindingKind(i);
    a.side = pk.side;
    a.commands = pk.commands;
    a.occurrences = pk.occurrences;
    a.lost_ms = pk.lost_ms;
    a.median_latency_ms = quantile(pk.latency, 0.5);
    a.median_fixed_ms = quantile(pk.fixed, 0.5);
    a.fix = fix_for(a.kind, a.side);
    a.example_frames = pk.examples;
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.lost_ms > b.lost_ms; });
  return out;
}

std::vector<ClassStats> Summary::classes() const {
  std::vector<ClassStats> out;
  for (auto& [key, pc] : classes_) {
    ClassStats s;
    s.kind = key.first;
    s.bytes = key.second;
    s.commands = pc.latency.size();
    s.median_ms = quantile(pc.latency, 0.5);
    s.p90_ms = quantile(pc.latency, 0.9);
    s.max_ms = pc.latency.empty() ? 0 : *std::max_element(pc.latency.begin(), pc.latency.end());
    s.median_round_trips = quantile(pc.round_trips, 0.5);
    s.ideal_round_trips = pc.ideal;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.commands > b.commands; });
  return out;
}

}  // namespace iscsi_doctor
