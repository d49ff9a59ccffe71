// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/initiator_estimate.hpp"

namespace iscsi_doctor::cli {

double initiator_offset_ms(const ConnectionInfo& k) {
  if (k.vantage == Vantage::initiator) return 0;
  return k.rtt_initiator_ms < 0 ? -1 : k.rtt_initiator_ms;
}

}  // namespace iscsi_doctor::cli
