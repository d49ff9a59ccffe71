// SPDX-License-Identifier: GPL-2.0-or-later
// The analyzer's Sink in front of the user's: what a connection finished before its linger ends
// says besides its facts is held here and said when the linger would have ended (Analyzer), so
// the report's order does not depend on when a connection was retired.
#pragma once

#include <type_traits>
#include <variant>
#include <vector>

#include "iscsi_doctor/analyzer.hpp"

namespace iscsi_doctor::session {

using Event = std::variant<CommandResult, Finding, Notice, ConnectionInfo>;

struct Relay final : Sink {
  Sink* to = nullptr;
  std::vector<Event>* held = nullptr;  // while a retired connection finishes
  template <typename T>
  bool keep(const T& x) {
    if (held) held->emplace_back(x);
    return held != nullptr;
  }
  void on_command(const CommandResult& c) override {
    if (!keep(c)) to->on_command(c);
  }
  void on_finding(const Finding& f) override {
    if (!keep(f)) to->on_finding(f);
  }
  void on_notice(const Notice& n) override {
    if (!keep(n)) to->on_notice(n);
  }
  void on_connection(const ConnectionInfo& c) override {
    if (!keep(c)) to->on_connection(c);
  }
  void say(std::vector<Event>& events) {
    for (const Event& e : events)
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, CommandResult>) to->on_command(x);
            if constexpr (std::is_same_v<T, Finding>) to->on_finding(x);
            if constexpr (std::is_same_v<T, Notice>) to->on_notice(x);
            if constexpr (std::is_same_v<T, ConnectionInfo>) to->on_connection(x);
          },
          e);
    events.clear();
  }
};

}  // namespace iscsi_doctor::session
