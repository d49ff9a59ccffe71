// SPDX-License-Identifier: GPL-2.0-or-later
#include "session/task_management.hpp"

#include <algorithm>

#include "util/hex.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {
namespace {

// RFC 7143 §11.5.1 function codes.
const char* function_name(uint8_t f) {
  static const char* const names[] = {"?",
                                      "ABORT TASK",
                                      "ABORT TASK SET",
                                      "CLEAR ACA",
                                      "CLEAR TASK SET",
                                      "LOGICAL UNIT RESET",
                                      "TARGET WARM RESET",
                                      "TARGET COLD RESET",
                                      "TASK REASSIGN"};
  return f < std::size(names) ? names[f] : nullptr;
}

// §11.6.1 responses.
std::string response_name(uint8_t r) {
  switch (r) {
    case 0: return "function complete";
    case 1: return "task does not exist";
    case 2: return "LUN does not exist";
    case 3: return "task still allegiant";
    case 4: return "task allegiance reassignment not supported";
    case 5: return "function not supported";
    case 6: return "function authorization failed";
    case 255: return "function rejected";
    default: return "response " + std::to_string(r);
  }
}

}  // namespace

void TaskManagement::on_request(const iscsi::Bhs& b, uint64_t frame, int64_t t, const Referenced& ref) {
  if (pending_.size() >= kMaxPending) pending_.erase(pending_.begin());  // bounded: a storm keeps the newest
  pending_.push_back({b.itt, b.referenced_task_tag(), b.tmf_function(), b.lun_number(), frame, t, ref});
}

std::vector<Notice> TaskManagement::on_response(const iscsi::Bhs& b, uint64_t frame, int64_t t) {
  const auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.itt == b.itt; });
  if (it == pending_.end()) return {};
  const Pending p = *it;
  pending_.erase(it);
  return {words(p, "answered '" + response_name(b.tmf_response()) + "' (frame " + std::to_string(frame) +
                       ", " + whole_ms(ms(t - p.t)) + " ms later)")};
}

std::vector<Notice> TaskManagement::finish() {
  std::vector<Notice> out;
  for (const Pending& p : pending_)
    out.push_back(words(p, "not answered in the capture"));
  pending_.clear();
  return out;
}

Notice TaskManagement::words(const Pending& p, const std::string& answer) {
  const char* name = function_name(p.function);
  std::string m = "task management: ";
  m += name ? std::string(name) : "function " + std::to_string(p.function);
  // Aborts and resets end commands: what an initiator does when one timed out.
  const bool ends_commands = p.function >= 1 && p.function <= 7;
  if (p.function == 1 || p.function == 8) {
    m += " of ITT " + hex_itt(p.referenced);
    m += p.ref.open ? " (" + p.ref.op + ", open " + whole_ms(ms(p.t - p.ref.first_ns)) + " ms)"
                    : " (no such command open in the capture)";
  } else {
    m += " on LUN " + std::to_string(p.lun);
  }
  m += ", " + answer;
  if (ends_commands) m += " (what an initiator sends when a command timed out)";
  return {ends_commands ? Notice::Level::warning : Notice::Level::info, p.frame, 0, m};
}

}  // namespace iscsi_doctor::session
