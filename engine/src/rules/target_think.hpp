// SPDX-License-Identifier: GPL-2.0-or-later
// target_think, think_or_hold and think_or_network (docs/rules.md "Other findings").
#pragma once

#include "rules/view.hpp"

namespace iscsi_doctor::rules {

class TargetThink {
public:
  // A reported command whose latency was mostly spent inside the target.
  void judge(const ConnectionView& v, FindingOut& out, OpenCommand& c) const;
};

}  // namespace iscsi_doctor::rules
