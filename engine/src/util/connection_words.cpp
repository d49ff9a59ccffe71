// SPDX-License-Identifier: GPL-2.0-or-later
// A connection's facts in words (results.hpp), shared by the CLI's text report and the C plugin;
// the Lua plugin's Connection:facts() says the same.
#include <string>

#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor {

std::string mss_words(const ConnectionInfo& c) {
  std::string s =
      "MSS initiator " + std::to_string(c.mss_initiator) + ", target " + std::to_string(c.mss_target);
  if (c.mss_inferred)  // said with its evidence: a capture joined mid-session has no SYN
    s += c.mss_source_initiator == c.mss_source_target
             ? " (inferred: " + c.mss_source_initiator + ")"
             : " (inferred: initiator " + c.mss_source_initiator + ", target " + c.mss_source_target + ")";
  return s;
}

std::string window_scale_words(const ConnectionInfo& c) {
  if (c.wscale_inferred)
    return "not in the capture: at least " + std::to_string(c.wscale_initiator) + " (initiator), " +
           std::to_string(c.wscale_target) + " (target), from the data in flight";
  return "initiator " + std::to_string(c.wscale_initiator) + ", target " + std::to_string(c.wscale_target) +
         " (handshake)";
}

std::string keys_words(const ConnectionInfo& c) {
  if (c.keys.empty()) return "no negotiated keys seen (login not captured)";
  std::string s;
  for (const auto& [k, v] : c.keys)
    s += (s.empty() ? "" : "  ") + k + "=" + v;
  return s;
}

std::string offload_words(const ConnectionInfo& c) {
  if (!c.offload_segments) return {};
  return std::to_string(c.offload_segments) + " segments longer than the MSS: TSO/GRO at the capture point";
}

std::string nagle_words(const ConnectionInfo& c) {
  const uint64_t i = c.nagle_off_frame_initiator, t = c.nagle_off_frame_target;
  if (!i && !t) return {};
  std::string s = "Nagle off on the ";
  if (i) s += "initiator (frame " + std::to_string(i) + ")";
  if (i && t) s += " and the ";
  if (t) s += "target (frame " + std::to_string(t) + ")";
  return s + ": a short segment sent while the previous one was unacknowledged";
}

std::string rtt_source_words(const ConnectionInfo& c) {
  const auto side = [](const std::string& src) {
    if (src.empty()) return std::string("not measured");
    if (src == "ACKs on data") return std::string("ACKs on data only (an upper bound: may hold its answer time)");
    if (src == "pure ACKs that may be delayed")
      return std::string("pure ACKs of one segment or less only (an upper bound: each may have waited for a "
                         "delayed-ACK timer)");
    if (src == "Nagle releases")
      return std::string("Nagle releases (short segments that left a fixed time after the ACK of the one "
                         "before, however late it came: a round trip if Nagle is on)");
    return src;
  };
  return "initiator " + side(c.rtt_source_initiator) + ", target " + side(c.rtt_source_target);
}

}  // namespace iscsi_doctor
