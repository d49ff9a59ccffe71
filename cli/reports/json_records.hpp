// SPDX-License-Identifier: GPL-2.0-or-later
// The records of --format json and --format jsonl (docs/json-schema.md): a command or finding as an
// element of its array (line == null) or as a JSON Lines record (`line`: its first members,
// "type":... ready written); a capture and the gate as JSON values; the advice's example frames.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/report.hpp"

namespace iscsi_doctor::cli::json {

constexpr int kSchemaVersion = 1;

// initiator_latency_ms: the estimate (initiator_estimate.hpp); negative: null.
void write_command(ElementStream& s, const CommandResult& c, size_t capture, double initiator_latency_ms,
                   const std::string* line = nullptr);
void write_finding(ElementStream& s, const Finding& f, double time_lost_ms, size_t capture,
                   const std::string* line = nullptr);
nlohmann::json gate_json(const GateResult& g);
// A capture as the reports describe it (its summary included): captures[] of --format json, the
// "capture" record of --format jsonl.
nlohmann::json capture_json(const CaptureResult& r, const std::string& filter);

// The run's summary names, per finding kind, example frames of one capture: the one that lost the
// most time to the kind (frame numbers are per capture), as `example_capture`. The summary over
// several captures mixes its examples' frames, so they are taken from the captures' own.
class AdviceExamples {
public:
  void add(const CaptureResult& r) {
    if (!r.summary) return;
    for (const Advice& a : r.summary->advice())
      examples_.push_back({r.index, a.kind, a.lost_ms, a.example_frames});
  }
  void apply(nlohmann::json& summary) const {
    if (!summary.is_object() || !summary.contains("advice")) return;
    for (auto& a : summary["advice"]) {
      const auto kind = finding_from_name(a["kind"].get<std::string>());
      const Example* best = nullptr;
      for (const Example& e : examples_)
        if (kind && e.kind == *kind && (!best || e.lost_ms > best->lost_ms)) best = &e;
      a["example_frames"] = best ? nlohmann::json(best->frames) : nlohmann::json::array();
      a["example_capture"] = best ? nlohmann::json(best->capture) : nlohmann::json(nullptr);
    }
  }

private:
  struct Example {
    size_t capture;
    FindingKind kind;
    double lost_ms;
    std::vector<uint64_t> frames;
  };
  std::vector<Example> examples_;
};

}  // namespace iscsi_doctor::cli::json
