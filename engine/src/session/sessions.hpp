// SPDX-License-Identifier: GPL-2.0-or-later
// Groups connections into iSCSI sessions: by initiator name, ISID, target and TSIH once a login
// is seen (RFC 7143 §4.4), else one session per connection.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "iscsi_doctor/results.hpp"

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

private:
  std::map<std::string, uint32_t> ids_;
  std::vector<SessionInfo> sessions_;
};

}  // namespace iscsi_doctor::session
