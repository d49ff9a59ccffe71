// SPDX-License-Identifier: GPL-2.0-or-later
// Groups connections into iSCSI sessions: by initiator name, ISID, target and TSIH once a login
// is seen (RFC 7143 §4.4), else one session per connection. Also what connections between the
// same two hosts share: the link (docs/rules.md "The link").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "iscsi_doctor/results.hpp"
#include "tcp/flow.hpp"

namespace iscsi_doctor::session {

class SessionRegistry {
public:
  uint32_t resolve(const std::string& key) {
    auto [it, added] = ids_.try_emplace(key, uint32_t(sessions_.size() + 1));
    if (added) sessions_.push_back(SessionInfo{it->second, {}, {}, {}, {}, 0, {}});
    return it->second;
  }
  SessionInfo& info(uint32_t id) { return sessions_.at(id - 1); }
  const std::vector<SessionInfo>& all() const { return sessions_; }
  // The link from one host to another, as all their connections' ACKs show it; null beyond
  // kMaxPaths host pairs (memory: a scan of many hosts), where each connection has its own.
  tcp::LinkMeter* path(const Address& from, const Address& to) {
    auto it = paths_.find({from, to});
    if (it != paths_.end()) return &it->second;
    if (paths_.size() >= kMaxPaths) return nullptr;
    return &paths_[{from, to}];
  }
  static constexpr size_t kMaxPaths = 4096;

private:
  std::map<std::pair<Address, Address>, tcp::LinkMeter> paths_;
  std::map<std::string, uint32_t> ids_;
  std::vector<SessionInfo> sessions_;
};

}  // namespace iscsi_doctor::session
