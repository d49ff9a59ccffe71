// SPDX-License-Identifier: GPL-2.0-or-later
// Names and JSON fragments shared by the report formats.
#include <array>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "iscsi_doctor/scsi.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {

const BreakdownPart kBreakdownParts[10] = {
    {"request", &Breakdown::request_ms},
    {"think", &Breakdown::think_ms},
    {"data", &Breakdown::data_ms},
    {"nagle", &Breakdown::nagle_ms},
    {"delayed_ack", &Breakdown::delayed_ack_ms},
    {"r2t", &Breakdown::r2t_ms},
    {"window", &Breakdown::window_ms},
    {"loss", &Breakdown::loss_ms},
    {"response", &Breakdown::response_ms},
    {"link", &Breakdown::link_ms},
};

std::string_view command_kind_name(char kind) {
  switch (kind) {
    case 'r':
      return "read";
    case 'w':
      return "write";
    default:
      return "other";
  }
}

// The SCSI table's names (engine/src/scsi/table.def); a status not in it by number.
std::string scsi_status_name(uint8_t status) {
  const std::string_view name = scsi::status_name(status);
  return name.empty() ? fmt::format("0x{:02x}", status) : std::string(name);
}

std::string_view asc_name(int asc, int ascq) {
  if (asc < 0 || asc > 0xff || ascq < 0 || ascq > 0xff) return {};
  return scsi::asc_name(uint8_t(asc), uint8_t(ascq));
}

std::string_view notice_level_name(Notice::Level level) {
  switch (level) {
    case Notice::Level::info:
      return "info";
    case Notice::Level::warning:
      return "warning";
    default:
      return "error";
  }
}

double round_ns(double ms) {
  if (!std::isfinite(ms)) return 0;
  return std::round(ms * 1e6) / 1e6;
}

double round_us(double ms) {
  if (!std::isfinite(ms)) return 0;
  return std::round(ms * 1e3) / 1e3;
}

nlohmann::json ms_or_null(double ms) {
  if (!std::isfinite(ms) || ms < 0) return nullptr;
  return round_ns(ms);
}

void write_ms(OutBuf& out, double ms) {
  if (ms == 0 && !std::signbit(ms)) {  // most parts of a breakdown
    out += '0';
    return;
  }
  const double ns = std::round(ms * 1e6);
  if (std::fabs(ns) < 1e15 && (std::fabs(ns) >= 100 || (ns == 0 && !std::signbit(ns)))) {
    auto n = int64_t(ns);
    if (n < 0) {
      out += '-';
      n = -n;
    }
    out.number(n / 1'000'000);
    if (int64_t frac = n % 1'000'000) {
      char d[7] = {'.'};
      for (int i = 6; i >= 1; --i, frac /= 10)
        d[i] = char('0' + frac % 10);
      int len = 7;
      while (d[len - 1] == '0')
        --len;
      out += std::string_view(d, size_t(len));
    }
    return;
  }
  out.format(FMT_COMPILE("{}"), round_ns(ms));
}

namespace {
// Whether any of 8 bytes is a control character, '"', '\\' or DEL (the bit tricks of "Bit Twiddling
// Hacks", haszero/hasless: exact for bytes below 0x80, and a byte of 0x80 or more never matches).
bool needs_escape8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const auto has_zero = [](uint64_t x) { return (x - ones) & ~x & highs; };
  const uint64_t below_space = (v - ones * 0x20) & ~v & highs;
  return below_space | has_zero(v ^ (ones * '"')) | has_zero(v ^ (ones * '\\')) | has_zero(v ^ (ones * 0x7f));
}
}  // namespace

void write_json_string(OutBuf& out, std::string_view s) {
  out += '"';
  size_t plain = 0;  // start of the run of characters that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    // Eight bytes at a time while none needs an escape (a finding's detail is a few hundred).
    while (i + 8 <= s.size() && !needs_escape8(s.data() + i))
      i += 8;
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f) continue;  // UTF-8 passes through
    out += s.substr(plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out.format(FMT_COMPILE("\\u{:04x}"), c);
    }
  }
  out += s.substr(plain);
  out += '"';
}

void copy_file(FILE* from, FILE* to) {
  std::fflush(from);
  std::rewind(from);
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, from)) > 0)
    std::fwrite(buf, 1, n, to);
}

namespace {

nlohmann::json counts_json(const Summary& s) {
  nlohmann::json counts = nlohmann::json::object();
  const auto c = s.finding_counts();
  for (size_t i = 0; i < finding_kind_count; ++i)
    counts[std::string(finding_name(FindingKind(i)))] = c[i];
  return counts;
}

}  // namespace

std::string missing_data_words(const CaptureResult& r) {
  uint64_t missing = r.unlisted.bytes_missing;
  for (const ConnectionInfo& c : r.connections)
    missing += c.bytes_missing;
  const uint64_t captured = r.stats.tcp_payload_bytes;
  if (missing == 0 || missing <= captured) return {};
  // The cause as the file shows it: packets cut by its snaplen, else packets the capture host dropped.
  return fmt::format(
      "most of the iSCSI data is missing from the capture: {} bytes that the receivers acknowledged were "
      "never captured, against {} captured ({}); commands are timed at the status headers the capture "
      "holds, and round trips counted only where it shows them",
      count_text(missing), count_text(captured),
      r.stats.snapped ? "the capture's snaplen cut its packets short" : "the capture host dropped packets");
}

std::string gate_words(const GateResult& g) {
  if (!g.requested) return "Gate: none asked (--fail-on, --max-excess-round-trips)";
  if (g.unevaluable) return "Gate: not evaluated, no SCSI command found";
  if (g.tripped) return fmt::format("Gate: TRIPPED ({})", join(g.reasons, "; "));
  return "Gate: passed";
}

std::string status_words(const StatusStats& st) {
  if (!st.answered) return "never answered";
  if (st.status == -2) return fmt::format("other statuses (over {})", Summary::kMaxStatuses);
  return st.status >= 0 ? scsi_status_name(uint8_t(st.status)) : "no SCSI status";
}

std::string sense_words(const StatusStats& st) {
  std::string w;
  if (st.sense_key >= 0)
    w = fmt::format("{}, ASC 0x{:02x} ASCQ 0x{:02x}", scsi::sense_key_name(uint8_t(st.sense_key)),
                    std::max(st.asc, 0), std::max(st.ascq, 0));
  if (const std::string_view name = asc_name(st.asc, st.ascq); st.sense_key >= 0 && !name.empty())
    w += fmt::format(" ({})", name);
  if (st.iscsi_response)
    w += fmt::format("{}iSCSI response 0x{:02x}", w.empty() ? "" : ", ", st.iscsi_response);
  return w;
}

std::vector<LunStats> session_rows(const Summary& s) {
  auto rows = s.sessions();
  for (LunStats& l : rows)
    if (l.lun != ~uint64_t(0)) l.target = fmt::format("{} ({})", l.lun, l.target);
  return rows;
}

nlohmann::json summary_json(const Summary& s) {
  nlohmann::json j;
  j["commands"] = s.commands();
  j["completed"] = s.completed();
  j["excess_round_trips"] = s.excess_round_trips();
  j["latency_total_ms"] = round_ns(s.latency_total_ms());
  j["time_lost_total_ms"] = round_ns(s.exclusive_total_ms());  // #27: the text's figure
  j["exclusive_total_ms"] = round_ns(s.exclusive_total_ms());
  j["finding_counts"] = counts_json(s);
  nlohmann::json advice = nlohmann::json::array();
  for (const Advice& a : s.advice()) {
    advice.push_back({{"kind", finding_name(a.kind)},
                      {"side", side_name(a.side)},
                      {"commands", a.commands},
                      {"occurrences", a.occurrences},
                      {"time_lost_ms", round_ns(a.exclusive_ms)},
                      {"touched_ms", round_ns(a.lost_ms)},
                      {"lost_ms", round_ns(a.lost_ms)},  // touched_ms's old name, kept one release
                      {"exclusive_ms", round_ns(a.exclusive_ms)},
                      {"median_latency_ms", round_us(a.median_latency_ms)},
                      {"median_fixed_ms", round_us(a.median_fixed_ms)},
                      {"fix", a.fix},
                      {"detail", a.detail},
                      {"note", a.note},
                      {"inferred", a.inferred},
                      {"example_frames", a.example_frames}});
  }
  j["advice"] = std::move(advice);
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassStats& c : s.classes()) {
    classes.push_back({{"kind", command_kind_name(c.kind)},
                       {"bytes", c.bytes},
                       {"commands", c.commands},
                       {"median_ms", round_us(c.median_ms)},
                       {"p90_ms", round_us(c.p90_ms)},
                       {"max_ms", round_ns(c.max_ms)},
                       {"median_round_trips", c.median_round_trips},
                       {"ideal_round_trips", c.ideal_round_trips}});
  }
  j["classes"] = std::move(classes);
  // A logical unit's or an initiator's figures (Summary::luns, Summary::initiators).
  auto scope = [](const LunStats& l) {
    return nlohmann::json{{"commands", l.commands},
                          {"never_answered", l.incomplete},
                          {"bytes_read", l.bytes_read},
                          {"bytes_written", l.bytes_written},
                          {"seconds", round_us(l.seconds * 1e3) / 1e3},
                          {"iops", round_us(l.iops())},
                          {"mb_per_s", round_us(l.mb_per_s())},
                          // false: fewer than kRateMinCommands or under a second, so no real rate
                          {"rate_meaningful", rate_meaningful(l)},
                          {"p50_ms", round_us(l.p50_ms)},
                          {"p90_ms", round_us(l.p90_ms)},
                          {"p99_ms", round_us(l.p99_ms)},
                          {"p999_ms", round_us(l.p999_ms)},
                          {"max_ms", round_us(l.max_ms)},
                          {"excess_round_trips", l.excess_round_trips}};
  };
  // A table's rows: the figures, then what the row is of (its key names it).
  const auto table = [&](const std::vector<LunStats>& rows, const char* who, const char* number) {
    nlohmann::json out = nlohmann::json::array();
    for (const LunStats& l : rows) {
      nlohmann::json row = scope(l);
      row[who] = l.target;
      if (number) row[number] = l.lun == ~uint64_t(0) ? nlohmann::json(nullptr) : nlohmann::json(l.lun);
      out.push_back(std::move(row));
    }
    return out;
  };
  j["luns"] = table(s.luns(), "target", "lun");
  j["initiators"] = table(s.initiators(), "initiator", nullptr);
  j["targets"] = table(s.targets(), "target", nullptr);
  j["sessions"] = table(s.sessions(), "target", "session");
  nlohmann::json statuses = nlohmann::json::array();
  auto opt = [](int v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const StatusStats& st : s.statuses())
    statuses.push_back(
        {{"answered", st.answered},
         {"status", st.status >= 0    ? nlohmann::json(scsi_status_name(uint8_t(st.status)))
                    : st.status == -2 ? nlohmann::json("other")
                                      : nlohmann::json(nullptr)},
         {"iscsi_response", st.iscsi_response},
         {"sense_key", st.sense_key >= 0 ? nlohmann::json(scsi::sense_key_name(uint8_t(st.sense_key)))
                                         : nlohmann::json(nullptr)},
         {"asc", opt(st.asc)},
         {"ascq", opt(st.ascq)},
         // T10's name of the pair; null without sense, or for a pair not in the table
         {"asc_name", asc_name(st.asc, st.ascq).empty() || st.sense_key < 0
                          ? nlohmann::json(nullptr)
                          : nlohmann::json(std::string(asc_name(st.asc, st.ascq)))},
         {"commands", st.commands},
         {"example",
          {{"itt", fmt::format("0x{:08x}", st.example_itt)},
           {"op", st.example_op},
           {"frame", st.example_frame}}}});
  j["statuses"] = std::move(statuses);
  return j;
}

const ConnectionInfo* CaptureResult::connection(uint32_t id) const {
  auto it = std::lower_bound(connections.begin(), connections.end(), id,
                             [](const ConnectionInfo& c, uint32_t v) { return c.id < v; });
  return it != connections.end() && it->id == id ? &*it : nullptr;
}

std::unordered_set<uint32_t> connections_in_sessions(const std::vector<SessionInfo>& sessions) {
  std::unordered_set<uint32_t> ids;
  for (const SessionInfo& s : sessions)
    ids.insert(s.connections.begin(), s.connections.end());
  return ids;
}

nlohmann::json totals_json(const ConnectionTotals& t) {
  return {{"connections", t.connections},    {"frames", t.frames},   {"pdus", t.pdus},
          {"commands", t.commands},          {"resyncs", t.resyncs}, {"digest_errors", t.digest_errors},
          {"bytes_missing", t.bytes_missing}};
}

VantageFacts vantage_of(const CaptureResult& r) {
  VantageFacts v;
  double rtt = 0, ini = 0, tgt = 0, wr = 0, wi = 0, wt = 0;
  bool first = true;
  for (const ConnectionInfo& c : r.connections) {
    if (!c.commands) continue;
    const std::string where(vantage_name(c.vantage));
    if (first) v.capture_point = where;
    else if (v.capture_point != where) v.capture_point = "mixed";
    first = false;
    const double n = double(c.commands);
    if (c.rtt_ms >= 0) rtt += n * c.rtt_ms, wr += n;
    // Near the initiator the capture point is the initiator: nothing to add.
    const double to_ini = c.vantage == Vantage::initiator ? 0.0 : c.rtt_initiator_ms;
    if (to_ini >= 0) ini += n * to_ini, wi += n;
    if (c.rtt_target_ms >= 0) tgt += n * c.rtt_target_ms, wt += n;
    v.rtt_at_most = v.rtt_at_most || c.rtt_target_may_hold_own_time;
    if (to_ini >= kInitiatorRttShownMs && c.rtt_initiator_may_hold_own_time) v.to_initiator_at_most = true;
  }
  if (wr > 0) v.rtt_ms = rtt / wr;
  if (wi > 0) v.to_initiator_ms = ini / wi;
  if (wt > 0) v.to_target_ms = tgt / wt;
  return v;
}

std::string vantage_sentence(const VantageFacts& v) {
  if (v.capture_point == "initiator") {
    const char* bound =
        v.rtt_at_most ? ", known only from the target's answers, which may hold its own time" : "";
    return fmt::format("Latencies as the initiator saw them (captured near the initiator; round trip {}{}{})",
                       v.rtt_at_most ? "at most " : "", ms_text(v.rtt_ms), bound);
  }
  const std::string where = v.capture_point == "target"    ? "near the target"
                            : v.capture_point == "midpath" ? "mid-path"
                            : v.capture_point == "mixed"   ? "at points that differ by connection"
                                                           : "at a capture point whose place is not known";
  if (v.to_initiator_ms < 0)
    return fmt::format("Latencies measured {}, not as the initiator saw them (round trip to it not measured)", where);
  // That round trip known only from the initiator's answers may hold its own time (a delayed ACK).
  const char* at_most = v.to_initiator_at_most ? "at most " : "";
  const char* bound =
      v.to_initiator_at_most ? ", known only from the initiator's answers, which may hold its own time" : "";
  if (!v.shows_estimate())
    return fmt::format("Latencies measured {} (round trip {}, {}{} of it between the capture point and the "
                       "initiator{})",
                       where, ms_text(v.rtt_ms), at_most, ms_text(v.to_initiator_ms), bound);
  return fmt::format(
      "Latencies measured {}: the initiator saw {} {} more (the round trip between the capture point "
      "and it{}), shown as \"initiator (est.)\"",
      where, v.to_initiator_at_most ? "at most" : "about", ms_text(v.to_initiator_ms), bound);
}

nlohmann::json vantage_json(const VantageFacts& v) {
  return {{"capture_point", v.capture_point},
          {"rtt_ms", ms_or_null(v.rtt_ms)},
          {"to_initiator_ms", ms_or_null(v.to_initiator_ms)},
          {"to_target_ms", ms_or_null(v.to_target_ms)},
          {"rtt_at_most", v.rtt_at_most},
          {"to_initiator_at_most", v.to_initiator_at_most}};
}

}  // namespace iscsi_doctor::cli
