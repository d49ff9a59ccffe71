// SPDX-License-Identifier: GPL-2.0-or-later
// A command's latency as the initiator saw it, estimated (`initiator_latency_ms`, docs/json-schema.md):
// the latency at the capture point plus its connection's measured round trip capture point ->
// initiator -> capture point (nothing near the initiator). The round trip is final once the engine
// reports the connection (at its end or the capture's), so reports that write commands as they come
// hold them until then, in order; when many are held, the round trip measured so far is taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "iscsi_doctor/results.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {

// What to add to a latency at this connection's capture point: 0 near the initiator, the round
// trip to the initiator elsewhere; -1 when it was not measured.
double initiator_offset_ms(const ConnectionInfo& k);
// -1 (null) when the offset is unknown or the command did not complete.
inline double initiator_latency_ms(const CommandResult& c, double offset_ms) {
  return c.completed && offset_ms >= 0 ? c.latency_ms + offset_ms : -1;
}

// What a held element's connection is: a command's, or (a held list that only follows another's
// sizes, on the thread that must know when it is full) the connection number itself.
inline uint32_t held_connection(const CommandResult& c) { return c.connection; }
inline uint32_t held_connection(uint32_t connection) { return connection; }

// Commands held, in the order they came, until their connection's round trip is final. Held<uint32_t>
// keeps only their connections: its sizes are those of a Held<CommandResult> given the same calls.
template <typename T>
class Held {
public:
  using Release = std::function<void(const T&, double initiator_latency_ms)>;
  explicit Held(Release release) : release_(std::move(release)) {}

  void command(const T& c) {
    held_.push_back(c);
    ++held_per_connection_[held_connection(c)];
  }
  // The connection's facts are final: the commands held up to the first of an open connection go.
  // A connection is reported after all its commands (the engine's order), so only the ones held
  // need its round trip, and it is kept only while they are.
  void connection(const ConnectionInfo& k) {
    if (!held_per_connection_.count(k.id)) return;
    final_[k.id] = initiator_offset_ms(k);
    size_t n = 0;
    while (n < held_.size() && final_.count(held_connection(held_[n])))
      ++n;
    release_front(n, nullptr);
  }
  // So many are held that they go now, with the round trips as `now` (the analyzer's connections
  // so far) has them.
  bool full() const { return held_.size() >= kHeld; }
  void release_all(const std::vector<ConnectionInfo>& now) { release_all(offsets_of(now)); }
  // The same, with `now` as each connection's offset (initiator_offset_ms).
  void release_all(const std::unordered_map<uint32_t, double>& offsets) { release_front(held_.size(), &offsets); }
  static std::unordered_map<uint32_t, double> offsets_of(const std::vector<ConnectionInfo>& now) {
    std::unordered_map<uint32_t, double> offsets;
    for (const ConnectionInfo& k : now)
      offsets[k.id] = initiator_offset_ms(k);
    return offsets;
  }
  // The capture is over (every connection reported): every held command goes.
  void finish() { release_front(held_.size(), nullptr); }

private:
  static constexpr size_t kHeld = 16384;
  void release_front(size_t n, const std::unordered_map<uint32_t, double>* now) {
    for (; n > 0; --n) {
      const T& c = held_.front();
      const uint32_t id = held_connection(c);
      if constexpr (std::is_same_v<T, CommandResult>) {
        double offset = -1;
        if (const auto it = final_.find(id); it != final_.end())
          offset = it->second;
        else if (now) {
          if (const auto jt = now->find(id); jt != now->end()) offset = jt->second;
        }
        release_(c, initiator_latency_ms(c, offset));
      }
      if (const auto it = held_per_connection_.find(id); --it->second == 0) {
        held_per_connection_.erase(it);
        final_.erase(id);
      }
      held_.pop_front();
    }
  }

  Release release_;
  std::deque<T> held_;
  std::unordered_map<uint32_t, uint32_t> held_per_connection_;
  std::unordered_map<uint32_t, double> final_;  // connection -> offset, once reported (while held)
};
using HeldCommands = Held<CommandResult>;

// A report's part that writes each command with its estimate: commands go through hold(), and
// come back to the Release given, in order, once their connection's round trip is final (or many
// are held: then the analyzer's connections so far are asked for between segments).
class EstimatingCaptureReport : public CaptureReport {
public:
  void connection(const ConnectionInfo& k) override { held_.connection(k); }
  void connections_now(const std::vector<ConnectionInfo>& now) override {
    held_.release_all(now);
    wants_connections_ = false;
  }

protected:
  explicit EstimatingCaptureReport(HeldCommands::Release release) : held_(std::move(release)) {}
  void hold(const CommandResult& c) {
    held_.command(c);
    wants_connections_ = held_.full();
  }
  void release_held() { held_.finish(); }

private:
  HeldCommands held_;
};

}  // namespace iscsi_doctor::cli
