// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/json_sessions.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace iscsi_doctor::cli {

void write_dumped_string(OutBuf& out, std::string_view s) {
  // Printable ASCII without '"' or '\\' is written as it is; anything else as nlohmann writes it.
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_dumped_double(OutBuf& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, v);
  out += std::string_view(buf, size_t(end - buf));
}

namespace {

// The writer of one object: keys are given in sorted order by the caller, as nlohmann keeps them.
class Obj {
public:
  explicit Obj(OutBuf& o) : o_(o) { o_ += '{'; }
  void close() { o_ += '}'; }
  OutBuf& key(std::string_view k) {
    next();
    o_ += '"';
    o_ += k;
    o_ += "\":";
    return o_;
  }
  // A key from the capture (a negotiated key's name), escaped as a string is.
  OutBuf& any_key(std::string_view k) {
    next();
    write_dumped_string(o_, k);
    o_ += ':';
    return o_;
  }
  template <typename T>
  void num(std::string_view k, T v) {
    key(k).number(v);
  }
  void boolean(std::string_view k, bool v) { key(k) += v ? "true" : "false"; }
  void str(std::string_view k, std::string_view v) { write_dumped_string(key(k), v); }
  void str_or_null(std::string_view k, const std::string& v) {
    if (v.empty())
      key(k) += "null";
    else
      str(k, v);
  }
  // Milliseconds as ms_or_null has them: unknown (negative, not finite) null, else to the nanosecond.
  void ms(std::string_view k, double v) {
    if (!std::isfinite(v) || v < 0)
      key(k) += "null";
    else
      write_dumped_double(key(k), round_ns(v));
  }
  // A path rate: -1 null, else to a tenth.
  void rate(std::string_view k, double v) {
    if (v < 0)
      key(k) += "null";
    else
      write_dumped_double(key(k), std::round(v * 10) / 10);
  }

private:
  void next() {  // a comma before every member but the first
    if (!first_) o_ += ',';
    first_ = false;
  }
  OutBuf& o_;
  bool first_ = true;
};

// {"initiator": ..., "target": ...}: the two sides' words (an MSS's or a round trip's source).
void write_sides(Obj& j, std::string_view key, const std::string& initiator, const std::string& target) {
  Obj s(j.key(key));
  s.str("initiator", initiator);
  s.str("target", target);
  s.close();
}

// The negotiated keys as an object: sorted, a key given twice with its later value.
void write_keys(OutBuf& o, const ConnectionInfo& c) {
  std::vector<const std::pair<std::string, std::string>*> keys;
  keys.reserve(c.keys.size());
  for (const auto& kv : c.keys)
    keys.push_back(&kv);
  std::stable_sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return a->first < b->first; });
  Obj j(o);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + 1 < keys.size() && keys[i + 1]->first == keys[i]->first) continue;  // the later one stays
    write_dumped_string(j.any_key(keys[i]->first), keys[i]->second);
  }
  j.close();
}

void write_mss(OutBuf& o, const ConnectionInfo& c) {
  Obj j(o);
  j.boolean("inferred", c.mss_inferred);
  j.num("initiator", c.mss_initiator);
  write_sides(j, "source", c.mss_source_initiator, c.mss_source_target);
  j.num("target", c.mss_target);
  j.close();
}

void write_connection(OutBuf& o, const ConnectionInfo& c) {
  Obj j(o);
  j.num("connection", c.id);
  {
    Obj n(j.key("counts"));
    n.num("bytes_missing", c.bytes_missing);
    n.num("commands", c.commands);
    n.num("digest_errors", c.digest_errors);
    n.num("frames", c.frames);
    n.num("max_outstanding", c.max_outstanding);
    n.num("never_answered", c.never_answered);
    n.num("pdus", c.pdus);
    n.num("resyncs", c.resyncs);
    n.close();
  }
  j.boolean("data_digest", c.data_digest);
  j.boolean("header_digest", c.header_digest);
  j.str("initiator", c.initiator.str());
  write_keys(j.key("keys"), c);
  j.boolean("mid_session_start", c.mid_session_start);
  write_mss(j.key("mss"), c);
  {
    Obj n(j.key("nagle_off_frame"));
    n.num("initiator", c.nagle_off_frame_initiator);
    n.num("target", c.nagle_off_frame_target);
    n.close();
  }
  j.num("offload_segments", c.offload_segments);
  {
    Obj r(j.key("path_rate_mbit_s"));
    r.rate("to_initiator", c.rate_to_initiator_mbit_s);
    r.rate("to_target", c.rate_to_target_mbit_s);
    r.close();
  }
  {
    // Its evidence: the bytes the ACK train that showed it acknowledged (0: none).
    Obj r(j.key("path_rate_train_bytes"));
    r.num("to_initiator", c.rate_to_initiator_bytes);
    r.num("to_target", c.rate_to_target_bytes);
    r.close();
  }
  j.ms("rtt_initiator_ms", c.rtt_initiator_ms);
  j.ms("rtt_ms", c.rtt_ms);
  write_sides(j, "rtt_source", c.rtt_source_initiator, c.rtt_source_target);
  j.ms("rtt_target_ms", c.rtt_target_ms);
  j.boolean("saw_handshake", c.saw_handshake);
  j.boolean("saw_login", c.saw_login);
  j.str("target", c.target.str());
  j.str("vantage", vantage_name(c.vantage));
  {
    Obj w(j.key("window_scale"));
    w.boolean("inferred", c.wscale_inferred);
    w.num("initiator", c.wscale_initiator);
    w.num("target", c.wscale_target);
    w.close();
  }
  j.close();
}

}  // namespace

void write_sessions(OutBuf& out, const CaptureResult& r, const SessionsStyle& style) {
  // Sessions as the engine knows them, plus any connection whose session it did not list.
  std::vector<SessionInfo> sessions = r.sessions;
  const std::unordered_set<uint32_t> listed = connections_in_sessions(sessions);
  for (const ConnectionInfo& c : r.connections) {
    if (listed.count(c.id)) continue;
    auto it = std::find_if(sessions.begin(), sessions.end(), [&](const SessionInfo& s) { return s.id == c.session; });
    if (it == sessions.end()) {
      SessionInfo s;
      s.id = c.session;
      sessions.push_back(s);
      it = sessions.end() - 1;
    }
    it->connections.push_back(c.id);
  }

  std::vector<const ConnectionInfo*> conns;
  for (const SessionInfo& s : sessions) {
    conns.clear();
    ConnectionTotals t;
    uint32_t outstanding = 0;
    for (uint32_t id : s.connections)
      if (const ConnectionInfo* c = r.connection(id)) {
        conns.push_back(c);
        t.add(*c);
        outstanding = std::max(outstanding, c->max_outstanding);
      }
    const ConnectionInfo* lead = conns.empty() ? nullptr : conns.front();

    if (!style.jsonl_path && out.size()) out += ',';
    Obj j(out);
    j.num("capture", r.index);
    {
      OutBuf& o = j.key("connections");
      o += '[';
      for (size_t i = 0; i < conns.size(); ++i) {
        if (i) o += ',';
        write_connection(o, *conns[i]);
      }
      o += ']';
    }
    {
      Obj n(j.key("counts"));
      n.num("bytes_missing", t.bytes_missing);
      n.num("commands", t.commands);
      n.num("connections", t.connections);
      n.num("digest_errors", t.digest_errors);
      n.num("frames", t.frames);
      n.num("max_outstanding", outstanding);
      n.num("pdus", t.pdus);
      n.num("resyncs", t.resyncs);
      n.close();
    }
    j.boolean("data_digest", lead && lead->data_digest);
    j.boolean("header_digest", lead && lead->header_digest);
    j.str_or_null("initiator_name", s.initiator_name);
    j.str_or_null("isid", s.isid);
    if (lead)
      write_keys(j.key("keys"), *lead);
    else
      j.key("keys") += "{}";
    if (lead)
      write_mss(j.key("mss"), *lead);
    else
      j.key("mss") += "null";
    if (style.jsonl_path) j.str("path", *style.jsonl_path);
    if (lead) {
      write_sides(j, "peers", lead->initiator.str(), lead->target.str());
    } else {
      j.key("peers") += "null";
    }
    j.ms("rtt_initiator_ms", lead ? lead->rtt_initiator_ms : -1);
    j.ms("rtt_ms", lead ? lead->rtt_ms : -1);
    j.ms("rtt_target_ms", lead ? lead->rtt_target_ms : -1);
    j.num("session", s.id);
    j.str_or_null("session_type", s.session_type);
    j.str_or_null("target_name", s.target_name);
    j.num("tsih", s.tsih);
    if (style.jsonl_path) j.str("type", "session");
    j.str("vantage", lead ? vantage_name(lead->vantage) : std::string_view("unknown"));
    j.close();
    if (style.jsonl_path) out += '\n';
  }
}

}  // namespace iscsi_doctor::cli
