// SPDX-License-Identifier: GPL-2.0-or-later
// --junit FILE: the gate's checks and each capture's findings as JUnit XML test cases.
#pragma once

#include <string>
#include <vector>

#include "iscsi_doctor/summary.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {

// What the JUnit report keeps of a capture (its summary is gone by the end of the run).
struct JunitCapture {
  std::string path;
  bool usable = false;
  std::string error;
  uint64_t commands = 0;
  std::vector<Advice> advice;
};
JunitCapture junit_capture(const CaptureResult&);

// Writes the file; false with `error` set when it cannot. `all`: the run's summary (the gate's).
bool write_junit(const std::string& file, const std::vector<JunitCapture>& captures, const GateResult& gate,
                 const Summary* all, std::string& error);

}  // namespace iscsi_doctor::cli
