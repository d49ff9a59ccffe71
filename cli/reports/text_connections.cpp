// SPDX-License-Identifier: GPL-2.0-or-later
// The text report's Connections section: per session, each connection's round trips, MSS, keys
// and counts (what is unusual said); with -v every fact the engine keeps of it.
#include "reports/text_connections.hpp"

#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "reports/formatting.hpp"

namespace iscsi_doctor::cli::text {
namespace {

// -v: the rest of what the engine keeps of a connection, each fact with where it came from, whether
// it is unusual or not (the block above names only what is unusual).
void write_connection_detail(std::string& o, const ConnectionInfo& c) {
  auto ms = [](double v) { return v < 0 ? std::string("not measured") : ms_text(v); };
  auto rate = [](double m, uint64_t bytes) {
    return m > 0 ? fmt::format("{:.0f} Mbit/s (over {})", m, size_text(bytes)) : std::string("not measured");
  };
  // Said to be a bound where the report's head would say so (vantage_sentence).
  const bool bound = c.rtt_initiator_may_hold_own_time && c.rtt_initiator_ms >= kInitiatorRttShownMs;
  std::vector<std::string> facts{
      "window scale " + window_scale_words(c),
      "round trips from " + rtt_source_words(c),
      fmt::format("path rate to target {}, to initiator {}", rate(c.rate_to_target_mbit_s, c.rate_to_target_bytes),
                  rate(c.rate_to_initiator_mbit_s, c.rate_to_initiator_bytes)),
      fmt::format("header digest {}, data digest {}", c.header_digest ? "CRC32C" : "none",
                  c.data_digest ? "CRC32C" : "none"),
      c.vantage == Vantage::initiator
          ? std::string("latencies are the initiator's own (captured near it)")
          : fmt::format("the initiator saw each latency {}{} longer (round trip capture point - initiator{})",
                        bound ? "at most " : "", ms(c.rtt_initiator_ms),
                        bound ? ", which may hold the initiator's own time" : "")};
  if (!c.saw_handshake) facts.emplace_back("no TCP handshake in the capture");
  if (!c.saw_login) facts.emplace_back("no login in the capture");
  for (const std::string& f : facts)
    o += "    " + f + "\n";
}

}  // namespace

void write_sessions(std::string& o, const CaptureResult& r, bool verbose) {
  for (const SessionInfo& s : r.sessions) {
    std::string head = fmt::format("Session {}", s.id);
    if (!s.session_type.empty()) head += " " + s.session_type;
    if (!s.initiator_name.empty() || !s.target_name.empty())
      head += fmt::format("  {} -> {}", s.initiator_name.empty() ? "?" : s.initiator_name,
                          s.target_name.empty() ? "?" : s.target_name);
    if (!s.isid.empty()) head += fmt::format("  ISID {} TSIH {}", s.isid, s.tsih);
    o += head + "\n";
    for (uint32_t id : s.connections)
      if (const ConnectionInfo* cp = r.connection(id)) {
        const ConnectionInfo& c = *cp;
        o += fmt::format("  connection {}  initiator {} <-> target {}  (capture point {})\n", c.id,
                         c.initiator.str(), c.target.str(), vantage_words(c.vantage));
        // An RTT no segment measured is unknown, not 0.
        auto rtt = [](double ms) { return ms < 0 ? std::string("unknown") : ms_text(ms); };
        o += fmt::format("    RTT {} (capture point to initiator {}, to target {})   {}\n", rtt(c.rtt_ms),
                         rtt(c.rtt_initiator_ms), rtt(c.rtt_target_ms), mss_words(c));
        std::vector<std::string> keys;
        for (const auto& [k, v] : c.keys)
          keys.push_back(k + "=" + v);
        if (keys.empty()) keys.emplace_back("no negotiated keys seen (login not captured)");
        if (c.wscale_inferred) keys.push_back("window scale " + window_scale_words(c));
        if (c.offload_segments) keys.push_back(offload_words(c));
        if (std::string n = nagle_words(c); !n.empty()) keys.push_back(std::move(n));
        if (c.rtt_source_initiator != "handshake" || c.rtt_source_target != "handshake")
          keys.push_back("round trips from " + rtt_source_words(c));
        if (c.rate_to_target_mbit_s > 0 || c.rate_to_initiator_mbit_s > 0) {
          // docs/rules.md "The link": the fastest train of ACKs, a lower bound of the path's rate
          auto rate = [](double m) { return m > 0 ? fmt::format("{:.0f} Mbit/s", m) : std::string("unknown"); };
          keys.push_back(fmt::format("path rate to target {}, to initiator {} (fastest ACK train: at least)",
                                     rate(c.rate_to_target_mbit_s), rate(c.rate_to_initiator_mbit_s)));
        }
        wrap(o, keys, "    ");
        std::vector<std::string> counts{fmt::format("{} frames", count_text(c.frames)),
                                        fmt::format("{} PDUs", count_text(c.pdus)),
                                        plural(c.commands, "command", "commands"),
                                        fmt::format("at most {} in flight", c.max_outstanding)};
        // A command the capture never answers stays in flight to its end: say so beside the count.
        if (c.never_answered && c.max_outstanding > 1)
          counts.back() += fmt::format(" (counting {} never answered in the capture)", count_text(c.never_answered));
        if (c.mid_session_start) counts.emplace_back("joined mid-session");
        if (c.resyncs) counts.push_back(fmt::format("{} resyncs", count_text(c.resyncs)));
        if (c.digest_errors) counts.push_back(fmt::format("{} digest errors", count_text(c.digest_errors)));
        if (c.bytes_missing)
          counts.push_back(fmt::format("{} bytes missing from the capture", count_text(c.bytes_missing)));
        o += "    " + join(counts, ", ") + "\n";
        if (verbose) write_connection_detail(o, c);
      }
  }
  // Connections the engine put in no listed session.
  const std::unordered_set<uint32_t> listed = connections_in_sessions(r.sessions);
  for (const ConnectionInfo& c : r.connections) {
    if (!listed.count(c.id))
      o += fmt::format("Connection {}  initiator {} <-> target {}  (capture point {}), {} commands\n", c.id,
                       c.initiator.str(), c.target.str(), vantage_words(c.vantage), count_text(c.commands));
  }
  if (const ConnectionTotals& u = r.unlisted; u.connections)
    o += fmt::format(
        "{} more connections, analysed but not listed one by one: {} frames, {} PDUs, {} commands\n",
        count_text(u.connections), count_text(u.frames), count_text(u.pdus), count_text(u.commands));
}

}  // namespace iscsi_doctor::cli::text
