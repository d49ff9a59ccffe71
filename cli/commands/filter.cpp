// SPDX-License-Identifier: GPL-2.0-or-later
#include "commands/filter.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

namespace iscsi_doctor::cli {
namespace {

bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// "ADDR" matches the address whatever the port; "ADDR:PORT" ("[v6]:PORT") both.
bool endpoint_matches(const std::string& want, const Endpoint& e) {
  return want == e.addr.str() || want == e.str() || want == "[" + e.addr.str() + "]";
}

std::string_view kind_word(char k) { return k == 'r' ? "read" : k == 'w' ? "write" : "other"; }

}  // namespace

bool CommandFilter::active() const {
  return !luns.empty() || !initiators.empty() || !targets.empty() || !ops.empty() || min_latency_ms ||
         !itts.empty() || from || to;
}

bool parse_time_bound(const std::string& text, CommandFilter::Bound& out) {
  out = {};
  out.text = text;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0' && errno == 0 && std::isfinite(v) && v >= 0) {
    out.seconds = v;
    return true;
  }
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return false;
  double frac = 0;
  if (*rest == '.') {
    char* e = nullptr;
    frac = std::strtod(rest, &e);  // ".25"
    rest = e;
  }
  if (*rest == 'Z') ++rest;
  if (*rest) return false;
  const time_t secs = timegm(&tm);
  out.absolute = true;
  out.epoch_ns = int64_t(secs) * 1'000'000'000 + int64_t(std::llround(frac * 1e9));
  return true;
}

bool CommandFilter::matches(const CommandResult& c, const Endpoint* initiator, const Endpoint* target,
                            int64_t start_ns) const {
  auto at = [&](const Bound& b) {
    return b.absolute ? b.epoch_ns : start_ns + int64_t(std::llround(b.seconds * 1e9));
  };
  if (from && c.first_ns < at(*from)) return false;
  if (to && c.first_ns >= at(*to)) return false;
  if (!luns.empty() && !luns.count(c.lun)) return false;
  if (!itts.empty() && !itts.count(c.itt)) return false;
  if (min_latency_ms && (!c.completed || c.latency_ms < *min_latency_ms)) return false;
  if (!ops.empty() && std::none_of(ops.begin(), ops.end(), [&](const std::string& op) {
        return same_text(op, kind_word(c.kind)) || same_text(op, c.op);
      }))
    return false;
  auto any = [](const std::vector<std::string>& wanted, const Endpoint* e) {
    return e && std::any_of(wanted.begin(), wanted.end(),
                            [&](const std::string& w) { return endpoint_matches(w, *e); });
  };
  if (!initiators.empty() && !any(initiators, initiator)) return false;
  if (!targets.empty() && !any(targets, target)) return false;
  return true;
}

std::string CommandFilter::words() const {
  std::string w;
  auto add = [&](std::string_view opt, const std::string& v) {
    w += fmt::format("{}{} {}", w.empty() ? "" : " ", opt, v);
  };
  for (uint64_t l : luns)
    add("--lun", std::to_string(l));
  for (const auto& i : initiators)
    add("--initiator", i);
  for (const auto& t : targets)
    add("--target", t);
  for (const auto& o : ops)
    add("--op", o);
  if (min_latency_ms) add("--min-latency", fmt::format("{:g}", *min_latency_ms));
  for (uint32_t i : itts)
    add("--itt", fmt::format("0x{:08x}", i));
  if (from) add("--from", from->text);
  if (to) add("--to", to->text);
  return w;
}

void FilterSink::on_finding(const Finding& f) {
  if (!f.itt) {  // connection level (serialized): told if the connection kept a command
    held_connection_[f.connection].push_back(f);
    return;
  }
  held_[{f.connection, *f.itt, f.command_first_frame}].push_back(f);
}

void FilterSink::on_command(const CommandResult& c) {
  ++seen_;
  Endpoint ini, tgt;
  const bool by_endpoint = !f_.initiators.empty() || !f_.targets.empty();
  const bool known = by_endpoint && analyzer_ && analyzer_->endpoints(c.connection, ini, tgt);
  const bool keep = f_.matches(c, known ? &ini : nullptr, known ? &tgt : nullptr, start_ns_);
  const auto it = held_.find({c.connection, c.itt, c.first_frame});
  if (it != held_.end()) {
    if (keep)
      for (const Finding& f : it->second)
        next_.on_finding(f);
    held_.erase(it);
  }
  if (!keep) return;
  ++kept_;
  ++kept_by_connection_[c.connection];
  next_.on_command(c);
}

void FilterSink::on_connection(const ConnectionInfo& c) {
  // Its commands are all reported: findings still held belong to none of them.
  for (auto it = held_.begin(); it != held_.end();)
    it = std::get<0>(it->first) == c.id ? held_.erase(it) : std::next(it);
  if (auto it = held_connection_.find(c.id); it != held_connection_.end()) {
    if (kept_by_connection_.count(c.id))
      for (const Finding& f : it->second)
        next_.on_finding(f);
    held_connection_.erase(it);
  }
  kept_by_connection_.erase(c.id);
  next_.on_connection(c);
}

}  // namespace iscsi_doctor::cli
