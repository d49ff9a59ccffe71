// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/root_causes.hpp"

#include <algorithm>
#include <iterator>

namespace iscsi_doctor::cli {

namespace {
bool has(const std::vector<FindingKind>& v, FindingKind k) { return std::find(v.begin(), v.end(), k) != v.end(); }
}  // namespace

bool mechanical_op(std::string_view op) {
  // SMC (changers), SSC (tapes) and the SBC/SPC operations that move or spin media or flush it.
  static constexpr std::string_view kOps[] = {
      "MOVE MEDIUM", "EXCHANGE MEDIUM", "INITIALIZE ELEMENT STATUS", "INITIALIZE ELEMENT STATUS WITH RANGE",
      "READ ELEMENT STATUS", "POSITION TO ELEMENT", "REWIND", "LOAD UNLOAD", "SPACE(6)", "SPACE(16)",
      "LOCATE(10)", "LOCATE(16)", "ERASE(6)", "ERASE(16)", "WRITE FILEMARKS(6)", "WRITE FILEMARKS(16)",
      "FORMAT UNIT", "FORMAT MEDIUM", "SYNCHRONIZE CACHE(10)", "SYNCHRONIZE CACHE(16)", "START STOP UNIT",
      "REZERO UNIT", "SEND DIAGNOSTIC"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

bool tape_or_changer_op(std::string_view op) {
  static constexpr std::string_view kOps[] = {
      "MOVE MEDIUM", "EXCHANGE MEDIUM", "INITIALIZE ELEMENT STATUS", "INITIALIZE ELEMENT STATUS WITH RANGE",
      "READ ELEMENT STATUS", "POSITION TO ELEMENT", "REWIND", "LOAD UNLOAD", "SPACE(6)", "SPACE(16)",
      "LOCATE(10)", "LOCATE(16)", "ERASE(6)", "ERASE(16)", "WRITE FILEMARKS(6)", "WRITE FILEMARKS(16)",
      "READ BLOCK LIMITS", "READ POSITION", "FORMAT MEDIUM"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// A delayed ACK costs a command only because a segment waited for it: the hold is the cause
// (removing it removes the wait; quick-ACK only shortens it). A congestion window that stalls the
// command carrying a loss closed because of it.
FindingKind cause_of(FindingKind k, const std::vector<FindingKind>& on) {
  if (k == FindingKind::delayed_ack && has(on, FindingKind::nagle_hold)) return FindingKind::nagle_hold;
  if (k == FindingKind::cwnd_limited && has(on, FindingKind::retransmission)) return FindingKind::retransmission;
  return k;
}

std::string device_fix(FindingKind kind, const std::string& fix, const std::vector<RootCause>& roots) {
  for (const RootCause& r : roots) {
    if (r.kind != kind || !r.mechanical) continue;
    std::string ops;
    for (const std::string& op : r.mechanical_ops)
      ops += (ops.empty() ? "" : ", ") + op;
    if (r.mechanical == r.commands)
      return "none: the device's mechanical work (" + ops + "), expected of it; no disk is behind it";
    return "for the " + std::to_string(r.commands - r.mechanical) + " commands that are not mechanical work: " + fix;
  }
  return fix;
}

void RootCauses::side(FindingKind k, Side s) {
  if (!sides_[size_t(k)]) sides_[size_t(k)] = int(s) + 1;
}

void RootCauses::add(const CommandResult& c) {
  if (tape_or_changer_op(c.op) && tape_or_changer_.size() < kLunsKept) tape_or_changer_.insert({c.connection, c.lun});
  if (!c.completed) return;
  for (FindingKind root : c.findings) {
    if (cause_of(root, c.findings) != root) continue;
    PerCause& p = causes_[size_t(root)];
    ++p.commands;
    p.latency.add(float(c.latency_ms));
    // The cause's fix removes its whole chain; a factor's fix only the factor's own part.
    double chain = exclusive_ms(root, c.breakdown);
    for (FindingKind k : c.findings)
      if (k != root && cause_of(k, c.findings) == root) {
        ++p.factor_commands[size_t(k)];
        const double own = exclusive_ms(k, c.breakdown);
        chain += own;
        p.gain_ms[size_t(k)] += own;
        p.after[size_t(k)].add(float(std::max(0.0, c.latency_ms - own)));
      }
    // nagle_hold's explained part already holds the delayed ACK's wait (finding_kinds.hpp part2).
    const double removed = std::max(chain, explained_ms(root, c.breakdown));
    p.time_lost_ms += chain;
    if (root == FindingKind::target_think) {  // the device's own time: what kind of device?
      // Bounded: a live run of endless connections folds the later LUNs into one row.
      std::pair<uint32_t, uint64_t> key{c.connection, c.lun};
      if (!think_.count(key) && think_.size() >= kLunsKept) key = {0, ~uint64_t(0)};
      LunThink& l = think_[key];
      auto note = [&](std::vector<std::string>& ops) {
        if (ops.size() < 4 && std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
      };
      ++l.commands;
      l.ms += removed;
      note(l.ops);
      if (mechanical_op(c.op)) {
        ++l.mech_op_commands;
        l.mech_op_ms += removed;
        note(l.mech_ops);
      }
    }
    p.gain_ms[size_t(root)] += removed;
    p.after[size_t(root)].add(float(std::max(0.0, c.latency_ms - removed)));
  }
}

std::vector<RootCause> RootCauses::ranked(double floor_ms) const {
  std::vector<RootCause> out;
  for (size_t i = 0; i < N; ++i) {
    const PerCause& p = causes_[i];
    if (!p.commands) continue;
    RootCause r;
    r.kind = FindingKind(i);
    r.side = sides_[i] ? Side(sides_[i] - 1) : Side{};
    r.commands = p.commands;
    r.time_lost_ms = p.time_lost_ms;
    r.median_latency_ms = p.latency.quantile(0.5);
    if (FindingKind(i) == FindingKind::target_think)
      for (const auto& [lun, l] : think_) {
        const bool device = tape_or_changer_.count(lun) > 0;
        r.tape_or_changer = r.tape_or_changer || device;
        r.mechanical += device ? l.commands : l.mech_op_commands;
        r.mechanical_ms += device ? l.ms : l.mech_op_ms;
        for (const std::string& op : device ? l.ops : l.mech_ops)
          if (r.mechanical_ops.size() < 4 &&
              std::find(r.mechanical_ops.begin(), r.mechanical_ops.end(), op) == r.mechanical_ops.end())
            r.mechanical_ops.push_back(op);
      }
    for (size_t k = 0; k < N; ++k) {
      if (k != i && !p.factor_commands[k]) continue;
      if (k != i) {
        r.factors.push_back(FindingKind(k));
        r.factor_commands.push_back(p.factor_commands[k]);
      }
      // A fix cannot make a command quicker than the round trip it still needs.
      const double after = std::max(p.after[k].quantile(0.5), std::min(floor_ms, r.median_latency_ms));
      r.fixes.push_back({FindingKind(k), sides_[k] ? Side(sides_[k] - 1) : Side{}, p.gain_ms[k], after});
    }
    // The mechanical work has no fix: the target's disks are not what made it slow.
    for (RootFix& f : r.fixes)
      if (f.kind == FindingKind::target_think) f.gain_ms = std::max(0.0, f.gain_ms - r.mechanical_ms);
    std::stable_sort(r.fixes.begin(), r.fixes.end(),
                     [](const RootFix& a, const RootFix& b) { return a.gain_ms > b.gain_ms; });
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const RootCause& a, const RootCause& b) {
    const double ga = a.fixes.empty() ? 0 : a.fixes.front().gain_ms, gb = b.fixes.empty() ? 0 : b.fixes.front().gain_ms;
    return ga != gb ? ga > gb : a.time_lost_ms > b.time_lost_ms;
  });
  return out;
}

}  // namespace iscsi_doctor::cli
