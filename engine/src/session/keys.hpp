// SPDX-License-Identifier: GPL-2.0-or-later
// The operational values that decide how many round trips a command needs (RFC 7143 §13).
#pragma once

#include <cstdint>

namespace iscsi_doctor::session {

struct OperationalKeys {
  bool immediate_data = true;  // RFC default Yes
  bool initial_r2t = true;     // RFC default Yes
  uint32_t first_burst = 65536;
  uint32_t max_burst = 262144;
  uint32_t target_mrdsl = 8192;  // MaxRecvDataSegmentLength declared by the target
  uint32_t initiator_mrdsl = 8192;
  uint32_t max_outstanding_r2t = 1;
  bool from_login = false;  // seen in this capture, not defaulted or inferred
  bool login_cut = false;   // the login was captured, its text cut short (snaplen): not taken
  bool initial_r2t_inferred = false;

  // Round trips a command needs at best under these keys: 1, plus one per R2T cycle that the
  // data beyond the unsolicited part needs (MaxOutstandingR2T cycles may overlap).
  int ideal_round_trips(bool write, uint32_t bytes) const {
    if (!write || bytes == 0) return 1;
    uint64_t unsolicited = 0;
    if (immediate_data) unsolicited = min3(bytes, first_burst, target_mrdsl);
    if (!initial_r2t) unsolicited = bytes < first_burst ? bytes : first_burst;
    uint64_t rest = bytes - unsolicited;
    if (rest == 0) return 1;
    uint64_t burst = max_burst ? max_burst : 262144;
    uint64_t cycles = (rest + burst - 1) / burst;
    uint64_t parallel = max_outstanding_r2t ? max_outstanding_r2t : 1;
    return 1 + int((cycles + parallel - 1) / parallel);
  }

private:
  static uint64_t min3(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t m = a < b ? a : b;
    return m < c ? m : c;
  }
};

}  // namespace iscsi_doctor::session
