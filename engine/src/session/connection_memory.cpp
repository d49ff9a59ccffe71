// SPDX-License-Identifier: GPL-2.0-or-later
// What one connection costs the memory budget (session/memory_budget.hpp), and when it can be
// retired without changing its results.
#include <algorithm>
#include <climits>

#include "session/connection.hpp"

namespace iscsi_doctor::session {

namespace {
// Besides the object and its buffers: its entries in the Analyzer's tables (map and hash nodes, the
// budget's list) and malloc's headers and rounding of its ~30 allocations (measured: a storm's
// resident memory grew ~8% faster than the sizes alone).
constexpr size_t kTableBytes = 768;
// The wait after a FIN (and after the latest data) before a half-closed connection is retired:
// its ACK, the peer's FIN.
constexpr int64_t kFinRtts = 4;
constexpr int64_t kFinWaitMinNs = 1'000'000;

size_t flow_bytes(const tcp::Flow& f) {
  constexpr size_t kNode = 96;  // an out-of-order map node with its vector header
  return f.unacked.capacity() * sizeof(tcp::SentSegment) + f.acks.capacity() * sizeof(tcp::AckRecord) +
         f.ts_firsts.capacity() * sizeof(tcp::TsFirst) + f.out_of_order_bytes + f.out_of_order.size() * kNode;
}
}  // namespace

size_t Connection::memory_bytes() const {
  size_t n = sizeof(Connection) + kTableBytes + flow_bytes(tcp_.flow(0)) + flow_bytes(tcp_.flow(1)) +
             pdus_[0].memory_bytes() + pdus_[1].memory_bytes() + login_.memory_bytes() + slots_.memory_bytes() +
             settling_.capacity() * sizeof(uint32_t) + rules_.retransmission.memory_bytes() +
             orphans_.capacity() * sizeof(Orphan) + tmf_.memory_bytes() + initiator_name_.capacity() +
             target_name_.capacity();
  for (const Orphan& o : orphans_) n += o.event.data.capacity();
  return n;
}

int64_t Connection::finished_at() const {
  if (!tcp_.ending() || busy() || rules_.retransmission.pending() || !orphans_.empty() || !tmf_.idle() ||
      pdus_[0].pdus() + pdus_[1].pdus() == 0)  // no PDU: its frames are counted in a notice when reported
    return INT64_MAX;
  for (int d = 0; d < 2; ++d) {
    const tcp::Flow& f = tcp_.flow(d);
    if (!f.out_of_order.empty() || f.unseen_upto > f.next) return INT64_MAX;  // a hole may yet be filled
    // Data after its own FIN or RST: that was not its end (a damaged capture). Finished as without
    // a budget, after its linger, or when the capture ends.
    if (f.fin_seen && f.last_payload_t > tcp_.fin_t(d)) return INT64_MAX;
  }
  if (tcp_.closed() && tcp_.fins_acked() && !tcp_.reset()) return tcp_.first_fin_t();
  // Half-closed, the other side may still send (RFC 9293 §3.6): data after the FIN shows it does.
  // After an RST, what the peer had in flight still arrives.
  const int64_t since = std::max({tcp_.first_fin_t(), tcp_.flow(0).last_payload_t, tcp_.flow(1).last_payload_t});
  // Round trips not yet measured both ways: its linger, as without a budget.
  if (!rtt(0).known() || !rtt(1).known()) return since + linger_ns();
  return since + std::max(kFinWaitMinNs, kFinRtts * full_rtt_ns());
}

}  // namespace iscsi_doctor::session
