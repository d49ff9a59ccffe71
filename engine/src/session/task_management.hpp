// SPDX-License-Identifier: GPL-2.0-or-later
// Task management requests (RFC 7143 §11.5-11.6): an ABORT TASK or a LUN RESET is what an
// initiator sends when a command timed out, so each one is reported as a notice naming the task
// it concerns and the target's answer (docs/rules.md "Task management").
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "iscsi/pdu.hpp"
#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor::session {

class TaskManagement {
public:
  // What the connection knows of the referenced task when the request is seen.
  struct Referenced {
    bool open = false;
    std::string op;
    int64_t first_ns = 0;
  };
  void on_request(const iscsi::Bhs& b, uint64_t frame, int64_t t, const Referenced& ref);
  // The answer to a request seen earlier (by ITT); its notice is returned, or none.
  std::vector<Notice> on_response(const iscsi::Bhs& b, uint64_t frame, int64_t t);
  // Requests never answered in the capture.
  std::vector<Notice> finish();

  static constexpr size_t kMaxPending = 32;
  bool idle() const { return pending_.empty(); }
  size_t memory_bytes() const { return pending_.capacity() * sizeof(Pending); }

private:
  struct Pending {
    uint32_t itt = 0, referenced = 0;
    uint8_t function = 0;
    uint64_t lun = 0, frame = 0;
    int64_t t = 0;
    Referenced ref;
  };
  static Notice words(const Pending& p, const std::string& answer);
  std::vector<Pending> pending_;  // a vector: nothing allocated until the first request
};

}  // namespace iscsi_doctor::session
