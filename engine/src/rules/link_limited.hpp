// SPDX-License-Identifier: GPL-2.0-or-later
// link_limited (docs/rules.md "The link"), and the held findings it gives or drops.
#pragma once

#include "rules/view.hpp"

namespace iscsi_doctor::rules {

class LinkLimited {
public:
  // A reported command whose data kept the path busy: the link's share of its breakdown.
  void judge(const ConnectionView& v, FindingOut& out, OpenCommand& c) const;
  // The holds c's segments waited on, given when c is reported, less what the link explains.
  void give_held_findings(const ConnectionView& v, FindingOut& out, OpenCommand& c) const;
};

}  // namespace iscsi_doctor::rules
