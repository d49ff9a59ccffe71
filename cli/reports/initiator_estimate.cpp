// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/initiator_estimate.hpp"

namespace iscsi_doctor::cli {

double initiator_offset_ms(const ConnectionInfo& k) {
  if (k.vantage == Vantage::initiator) return 0;
  return k.rtt_initiator_ms < 0 ? -1 : k.rtt_initiator_ms;
}

void HeldCommands::command(const CommandResult& c) {
  held_.push_back(c);
  ++held_per_connection_[c.connection];
}

// A connection is reported after all its commands (the engine's order), so only the ones held
// need its round trip, and it is kept only while they are.
void HeldCommands::connection(const ConnectionInfo& k) {
  if (!held_per_connection_.count(k.id)) return;
  final_[k.id] = initiator_offset_ms(k);
  size_t n = 0;
  while (n < held_.size() && final_.count(held_[n].connection))
    ++n;
  release_front(n, nullptr);
}

void HeldCommands::release_all(const std::vector<ConnectionInfo>& now) {
  std::unordered_map<uint32_t, double> offsets;
  for (const ConnectionInfo& k : now)
    offsets[k.id] = initiator_offset_ms(k);
  release_front(held_.size(), &offsets);
}

void HeldCommands::finish() { release_front(held_.size(), nullptr); }

void HeldCommands::release_front(size_t n, const std::unordered_map<uint32_t, double>* now) {
  for (; n > 0; --n) {
    const CommandResult& c = held_.front();
    double offset = -1;
    if (const auto it = final_.find(c.connection); it != final_.end())
      offset = it->second;
    else if (now) {
      if (const auto jt = now->find(c.connection); jt != now->end()) offset = jt->second;
    }
    release_(c, initiator_latency_ms(c, offset));
    if (const auto it = held_per_connection_.find(c.connection); --it->second == 0) {
      held_per_connection_.erase(it);
      final_.erase(c.connection);
    }
    held_.pop_front();
  }
}

}  // namespace iscsi_doctor::cli
