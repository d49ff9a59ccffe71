// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/html_aggregates.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace iscsi_doctor::cli::html {
namespace {

// Bin of a gap of `bytes` (backwards when `back`): LBAs are 64-bit and corrupt or hostile ones
// reach 2^64-1, so the gap is kept as a sign and a 128-bit magnitude, never a signed 64-bit value.
__extension__ typedef unsigned __int128 u128;
int gap_bin(bool back, u128 bytes) {
  if (bytes == 0) return kGapBins;
  int bits = 0;
  for (u128 v = bytes; v; v >>= 1)
    ++bits;  // 1 + floor(log2(bytes))
  const int b = std::min(kGapBins, bits);
  return kGapBins + (back ? -b : b);
}

double score_for(size_t kind, const CommandResult& c) {
  if (kind == kSlowest || FindingKind(kind) == FindingKind::serialized) return c.latency_ms;
  return explained_ms(FindingKind(kind), c.breakdown);
}

}  // namespace

void Aggregator::first_time(int64_t t) {
  if (a_.have_first) return;
  a_.have_first = true;
  a_.first_ns = t;
  a_.time.start(t);
}

void Aggregator::command(const CommandResult& c) {
  a_.roots.add(c);
  std::vector<Finding> mine;
  if (auto it = a_.pending.find({c.connection, c.first_frame}); it != a_.pending.end()) {
    mine = std::move(it->second);
    a_.pending.erase(it);
  }
  if (c.completed) {
    ClassAgg& k = a_.classes[{c.kind, c.bytes}];
    k.hist.add(c.latency_ms);
    ++k.n;
    for (const auto& p : kBreakdownParts)
      k.sum.*p.field += c.breakdown.*p.field;
    a_.time.add_span(0, c.first_ns, c.status_ns, double(c.status_ns - c.first_ns));
    if (c.kind == 'r' || c.kind == 'w')
      a_.time.add_span(c.kind == 'r' ? 1 : 2, c.first_ns, c.status_ns, c.bytes);
  }
  if (c.lba && (c.kind == 'r' || c.kind == 'w')) lba(c);
  for (auto kind : c.findings)
    consider(size_t(kind), c, mine);
  if (c.completed && c.findings.empty()) consider(kSlowest, c, mine);
}

void Aggregator::finding(const Finding& f) {
  a_.roots.side(f.kind, f.side);
  if (!f.itt) return;
  for (auto& picks : a_.picks)  // a finding after its command: only picked ones care
    for (Pick& p : picks)
      if (p.req.command.connection == f.connection && p.req.command.first_frame == f.command_first_frame &&
          p.req.command.itt == *f.itt) {
        p.req.findings.push_back(f);
        return;
      }
  if (a_.pending.size() >= kPendingCap) {  // bounded: lose highlights, not memory
    if (!pending_cap_said_)
      notices_.on_notice(
          {Notice::Level::warning, f.frame, f.connection,
           fmt::format("HTML report's pending-findings cap ({}) hit: findings of {} commands not yet "
                       "reported are dropped; their ladders lack those highlights",
                       kPendingCap, a_.pending.size())});
    pending_cap_said_ = true;
    a_.pending.clear();
  }
  a_.pending[{f.connection, f.command_first_frame}].push_back(f);
}

void Aggregator::finish_lba() {
  for (auto& [conn, st] : a_.lba)
    while (!st.pending.empty()) {
      step(st, st.pending.top());
      st.pending.pop();
    }
}

void Aggregator::consider(size_t kind, const CommandResult& c, const std::vector<Finding>& mine) {
  auto& picks = a_.picks[kind];
  Pick p;
  p.score = score_for(kind, c);
  p.req.command.completed = c.completed;
  if (picks.size() >= per_kind_ && !p.before(picks.back())) return;
  p.req.command = c;
  p.req.findings = mine;
  auto at = std::upper_bound(picks.begin(), picks.end(), p,
                             [](const Pick& a, const Pick& b) { return a.before(b); });
  picks.insert(at, std::move(p));
  if (picks.size() > per_kind_) picks.pop_back();
}

void Aggregator::lba(const CommandResult& c) {
  LbaState& st = a_.lba[c.connection];
  st.pending.push({c.first_frame, *c.lba, c.bytes});
  if (st.pending.size() > kReorder) {
    step(st, st.pending.top());
    st.pending.pop();
  }
  a_.max_lba = std::max(a_.max_lba, *c.lba);
  if (a_.scatter_seen++ % a_.scatter_stride == 0) {
    a_.scatter.push_back({c.first_ns - a_.first_ns, *c.lba, c.kind});
    if (a_.scatter.size() >= kScatterPoints) {  // keep every other point, sample half as often
      size_t j = 0;
      for (size_t i = 0; i < a_.scatter.size(); i += 2)
        a_.scatter[j++] = a_.scatter[i];
      a_.scatter.resize(j);
      a_.scatter_stride *= 2;
    }
  }
}

void Aggregator::step(LbaState& st, const LbaState::Item& it) {
  if (st.have_prev) {
    ++a_.gap_pairs;
    const uint32_t bs[2] = {512, 4096};
    for (int i = 0; i < 2; ++i) {
      const u128 expect = u128(st.prev_lba) + st.prev_bytes / bs[i];
      const bool back = u128(it.lba) < expect;
      const u128 blocks = back ? expect - it.lba : u128(it.lba) - expect;
      a_.gaps[i][size_t(gap_bin(back, blocks * bs[i]))]++;
      a_.sequential[i] += blocks == 0;
    }
  }
  st.have_prev = true;
  st.prev_lba = it.lba;
  st.prev_bytes = it.bytes;
}

}  // namespace iscsi_doctor::cli::html
