// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi_doctor/summary.hpp"

#include "iscsi_doctor/finding_kinds.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

namespace iscsi_doctor {

namespace {
constexpr size_t kExamples = 5;
constexpr size_t kMaxNotices = 1000;

// Commands whose time is the device's own work, not a slow backing store: media changers, tapes,
// formatting, cache flushes, spin-up.
bool device_work(std::string_view op) {
  static constexpr std::string_view kOps[] = {"MOVE MEDIUM",
                                              "INITIALIZE ELEMENT STATUS",
                                              "READ ELEMENT STATUS",
                                              "POSITION TO ELEMENT",
                                              "REWIND",
                                              "LOAD UNLOAD",
                                              "SPACE(6)",
                                              "LOCATE(10)",
                                              "ERASE(6)",
                                              "WRITE FILEMARKS(6)",
                                              "FORMAT UNIT",
                                              "SYNCHRONIZE CACHE(10)",
                                              "SYNCHRONIZE CACHE(16)",
                                              "START STOP UNIT",
                                              "REZERO UNIT",
                                              "SEND DIAGNOSTIC"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Worst first: by excess round trips, then latency; or by latency alone.
bool worse(WorstOrder order, const CommandResult& a, const CommandResult& b) {
  int ea = a.round_trips - a.ideal_round_trips, eb = b.round_trips - b.ideal_round_trips;
  if (order == WorstOrder::excess && ea != eb) return ea > eb;
  return a.latency_ms > b.latency_ms;
}
}  // namespace

std::string_view worst_order_words(WorstOrder o) {
  return o == WorstOrder::latency ? "by latency" : "by excess round trips, then latency";
}

std::string fix_for(FindingKind kind, Side side) { return std::string(fix_text(kind, side)); }

void Summary::on_command(const CommandResult& c) {
  ++commands_;
  if (c.iscsi_opcode == 0x01) {
    const std::tuple<bool, int, int, int, int, int> key{c.completed,
                                                        c.scsi_status ? int(*c.scsi_status) : -1,
                                                        c.iscsi_response ? int(*c.iscsi_response) : 0,
                                                        c.sense_key ? int(*c.sense_key) : -1,
                                                        c.asc ? int(*c.asc) : -1,
                                                        c.ascq ? int(*c.ascq) : -1};
    auto it = statuses_.find(key);
    if (it == statuses_.end() && statuses_.size() >= kMaxStatuses)  // fuzzed statuses: one "other" row
      it = statuses_.try_emplace({true, -2, 0, -1, -1, -1}).first;
    if (it == statuses_.end()) it = statuses_.try_emplace(key).first;
    StatusStats& st = it->second;
    if (st.commands++ == 0) {
      std::tie(st.answered, st.status, st.iscsi_response, st.sense_key, st.asc, st.ascq) = it->first;
      st.example_op = c.op;
      st.example_itt = c.itt;
      st.example_frame = c.completed ? c.status_frame : c.first_frame;
    }
  }
  if (per_lun_ && c.iscsi_opcode == 0x01 && c.connection) {  // SCSI commands (not NOPs or task management)
    PerLun& l = open_luns_[{c.connection, c.lun}];
    if (!c.completed) {
      ++l.incomplete;
    } else {
      l.latency.add(float(c.latency_ms));
      if (c.kind == 'r') l.bytes_read += c.bytes;
      if (c.kind == 'w') l.bytes_written += c.bytes;
      if (c.round_trips > c.ideal_round_trips) l.excess += uint64_t(c.round_trips - c.ideal_round_trips);
      if (l.latency.size() == 1 || c.first_ns < l.first_ns) l.first_ns = c.first_ns;
      l.last_ns = std::max(l.last_ns, c.status_ns);
    }
  }
  if (!c.completed) return;
  ++completed_;
  latency_total_ms_ += c.latency_ms;
  if (c.round_trips > c.ideal_round_trips)
    excess_round_trips_ += uint64_t(c.round_trips - c.ideal_round_trips);
  auto& cls = classes_[{c.kind, c.bytes, c.ideal_round_trips}];
  cls.latency.add(float(c.latency_ms));
  cls.round_trips.add(uint32_t(std::max(c.round_trips, 0)));
  for (FindingKind k : c.findings) {
    auto& pk = kinds_[size_t(k)];
    ++pk.commands;
    pk.exclusive_ms += exclusive_ms(k, c.breakdown);
    if (k == FindingKind::target_think && device_work(c.op)) {
      ++pk.device_work;
      if (pk.device_ops.size() < 4 &&
          std::find(pk.device_ops.begin(), pk.device_ops.end(), c.op) == pk.device_ops.end())
        pk.device_ops.push_back(c.op);
    }
    pk.latency.add(float(c.latency_ms));
    pk.fixed.add(float(std::max(0.0, c.latency_ms - explained_ms(k, c.breakdown))));
  }
  if (worst_kept_) {
    const auto by = [this](const CommandResult& a, const CommandResult& b) { return worse(order_, a, b); };
    if (worst_.size() < worst_kept_) {
      worst_.push_back(c);
      std::sort(worst_.begin(), worst_.end(), by);
    } else if (by(c, worst_.back())) {
      worst_.back() = c;
      std::sort(worst_.begin(), worst_.end(), by);
    }
  }
}

void Summary::on_finding(const Finding& f) {
  auto& pk = kinds_[size_t(f.kind)];
  ++counts_[size_t(f.kind)];
  if (pk.occurrences == 0) {
    pk.side = f.side;
    pk.detail = f.detail;
  }
  ++pk.occurrences;
  pk.lost_ms += f.lost_ms;
  for (const std::string& fact : f.inferred)
    if (std::find(pk.inferred.begin(), pk.inferred.end(), fact) == pk.inferred.end())
      pk.inferred.push_back(fact);
  if (pk.examples.size() < kExamples) pk.examples.push_back(f.frame);
}

void Summary::PerLun::add(const PerLun& o) {
  if (o.latency.empty() && !o.incomplete) return;
  if (!o.latency.empty()) {
    first_ns = latency.empty() ? o.first_ns : std::min(first_ns, o.first_ns);
    last_ns = std::max(last_ns, o.last_ns);
  }
  latency.merge(o.latency);
  incomplete += o.incomplete;
  bytes_read += o.bytes_read;
  bytes_written += o.bytes_written;
  excess += o.excess;
}

void Summary::on_connection(const ConnectionInfo& k) {
  auto it = open_luns_.lower_bound({k.id, 0});
  const std::string target = k.target.str();
  std::pair<std::string, uint64_t> ini{k.initiator.addr.str(), ~uint64_t(0)};
  if (!initiators_.count(ini) && initiators_.size() >= kMaxLuns) ini.first = "(other initiators)";
  std::pair<std::string, uint64_t> tgt{target, ~uint64_t(0)};
  if (!targets_.count(tgt) && targets_.size() >= kMaxLuns) tgt.first = "(other targets)";
  std::pair<std::string, uint64_t> ses{target, k.session};
  if (!sessions_.count(ses) && sessions_.size() >= kMaxLuns) ses = {"(other sessions)", ~uint64_t(0)};
  while (it != open_luns_.end() && it->first.first == k.id) {
    std::pair<std::string, uint64_t> key{target, it->first.second};
    if (!luns_.count(key) && luns_.size() >= kMaxLuns) key = {"(other targets and LUNs)", ~uint64_t(0)};
    luns_[key].add(it->second);
    initiators_[ini].add(it->second);
    targets_[tgt].add(it->second);
    sessions_[ses].add(it->second);
    it = open_luns_.erase(it);
  }
}

void Summary::on_notice(const Notice& n) {
  if (notices_.size() < kMaxNotices)
    notices_.push_back(n);
  else
    ++notices_dropped_;
}

std::vector<Advice> Summary::advice() const {
  std::vector<Advice> out;
  for (size_t i = 0; i < finding_kind_count; ++i) {
    const auto& pk = kinds_[i];
    if (!pk.occurrences) continue;
    Advice a;
    a.kind = FindingKind(i);
    a.side = pk.side;
    a.commands = pk.commands;
    a.occurrences = pk.occurrences;
    a.lost_ms = pk.lost_ms;
    a.exclusive_ms = pk.exclusive_ms;
    a.median_latency_ms = pk.latency.quantile(0.5);
    a.median_fixed_ms = pk.fixed.quantile(0.5);
    a.fix = fix_for(a.kind, a.side);
    a.example_frames = pk.examples;
    a.detail = pk.detail;
    a.inferred = pk.inferred;
    if (pk.device_work) {
      std::string ops;
      for (const std::string& op : pk.device_ops)
        ops += (ops.empty() ? "" : ", ") + op;
      a.note = std::to_string(pk.device_work) + " of these " + std::to_string(pk.commands) +
               " commands are " + ops +
               ": their time is the device's own work (a changer's robot, tape motion, formatting, a cache "
               "flush, spin-up), expected of it, not a slow disk";
    }
    out.push_back(std::move(a));
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return a.exclusive_ms != b.exclusive_ms ? a.exclusive_ms > b.exclusive_ms : a.lost_ms > b.lost_ms;
  });
  return out;
}

double Summary::exclusive_total_ms() const {
  double t = 0;
  for (const auto& pk : kinds_)
    t += pk.exclusive_ms;
  return t;
}

std::vector<LunStats> Summary::luns() const { return rows(luns_); }
std::vector<LunStats> Summary::initiators() const { return rows(initiators_); }
std::vector<LunStats> Summary::targets() const { return rows(targets_); }
std::vector<LunStats> Summary::sessions() const { return rows(sessions_); }

std::vector<LunStats> Summary::rows(const std::map<std::pair<std::string, uint64_t>, PerLun>& m) {
  std::vector<LunStats> out;
  for (const auto& [key, l] : m) {
    LunStats s;
    s.target = key.first;
    s.lun = key.second;
    s.commands = l.latency.size();
    s.incomplete = l.incomplete;
    s.bytes_read = l.bytes_read;
    s.bytes_written = l.bytes_written;
    s.seconds = double(l.last_ns - l.first_ns) / 1e9;
    // One selection pass for the five figures (a full sort costs n log n).
    const auto q = l.latency.quantiles({0.5, 0.9, 0.99, 0.999, 1});
    s.p50_ms = q[0];
    s.p90_ms = q[1];
    s.p99_ms = q[2];
    s.p999_ms = q[3];
    s.max_ms = q[4];
    s.excess_round_trips = l.excess;
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.commands > b.commands; });
  return out;
}

std::vector<StatusStats> Summary::statuses() const {
  std::vector<StatusStats> out;
  for (const auto& [key, st] : statuses_)
    out.push_back(st);
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.commands > b.commands; });
  return out;
}

std::vector<ClassStats> Summary::classes() const {
  std::vector<ClassStats> out;
  for (auto& [key, pc] : classes_) {
    ClassStats s;
    s.kind = std::get<0>(key);
    s.bytes = std::get<1>(key);
    s.commands = pc.latency.size();
    s.median_ms = pc.latency.quantile(0.5);
    s.p90_ms = pc.latency.quantile(0.9);
    s.max_ms = pc.latency.max();
    s.median_round_trips = pc.round_trips.quantile(0.5);
    s.ideal_round_trips = std::get<2>(key);
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.commands > b.commands; });
  return out;
}

}  // namespace iscsi_doctor
