// SPDX-License-Identifier: GPL-2.0-or-later
// Command filters (--lun, --initiator, --target, --op, --min-latency, --itt): the reports, tables
// and findings of a capture then cover the matching commands only. The engine analyses everything
// (a command's verdict needs its whole connection); the filter sits between it and the reports.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "iscsi_doctor/analyzer.hpp"

namespace iscsi_doctor::cli {

struct CommandFilter {
  std::set<uint64_t> luns;
  std::vector<std::string> initiators, targets;  // "ADDR" or "ADDR:PORT" ("[v6]:PORT")
  std::vector<std::string> ops;                  // "read", "write", "other", or a SCSI op ("READ(10)")
  std::optional<double> min_latency_ms;          // completed commands at least this slow
  std::set<uint32_t> itts;
  // Time window: commands that began at or after `from` and before `to`, each either seconds from
  // the capture's first packet (relative) or nanoseconds since the epoch (absolute).
  struct Bound {
    bool absolute = false;
    double seconds = 0;    // relative
    int64_t epoch_ns = 0;  // absolute
    std::string text;      // as given
  };
  std::optional<Bound> from, to;

  bool active() const;
  // Endpoints null: unknown (then --initiator/--target do not match). start_ns: the capture's
  // first packet, for a relative window.
  bool matches(const CommandResult& c, const Endpoint* initiator, const Endpoint* target,
               int64_t start_ns) const;
  std::string words() const;  // "--lun 1 --op read", as given
};

// "12.5" (seconds from the capture's start) or "2026-11-24T14:02:00[.25][Z]" (UTC); false when neither.
bool parse_time_bound(const std::string& text, CommandFilter::Bound& out);

// Passes on the commands the filter matches, with their findings (held until their command is
// reported, then passed on before it or dropped with it); a connection-level finding when its
// connection kept a command (at the connection's end); every notice and connection.
class FilterSink final : public Sink {
public:
  FilterSink(const CommandFilter& f, Sink& next) : f_(f), next_(next) {}
  void set_analyzer(const Analyzer* a) { analyzer_ = a; }
  void set_start(int64_t t) { start_ns_ = t; }
  void on_command(const CommandResult&) override;
  void on_finding(const Finding&) override;
  void on_notice(const Notice& n) override { next_.on_notice(n); }
  void on_connection(const ConnectionInfo& c) override;
  uint64_t seen() const { return seen_; }
  uint64_t kept() const { return kept_; }

private:
  const CommandFilter& f_;
  Sink& next_;
  const Analyzer* analyzer_ = nullptr;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::vector<Finding>> held_;  // by command
  std::map<uint32_t, std::vector<Finding>> held_connection_;  // connection level, until its end
  std::map<uint32_t, uint64_t> kept_by_connection_;
  uint64_t seen_ = 0, kept_ = 0;
  int64_t start_ns_ = 0;
};

}  // namespace iscsi_doctor::cli
