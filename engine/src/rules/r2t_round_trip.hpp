// SPDX-License-Identifier: GPL-2.0-or-later
// r2t_round_trip (docs/rules.md "Other findings").
#pragma once

#include "rules/view.hpp"

namespace iscsi_doctor::rules {

class R2tRoundTrip {
public:
  // A reported write that waited for R2T round trips the keys could have avoided.
  void judge(FindingOut& out, OpenCommand& c) const;
};

}  // namespace iscsi_doctor::rules
