// SPDX-License-Identifier: GPL-2.0-or-later
// Standard error while captures are read: notices and the progress line share it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

namespace iscsi_doctor::cli {

class Console {
public:
  Console(bool quiet, uint64_t total_bytes, size_t files)
      : quiet_(quiet),
        progress_(!quiet && ::isatty(STDERR_FILENO)),
        total_bytes_(total_bytes),
        files_(files),
        positions_(files),
        packets_(files) {}

  void message(const std::string& line);
  bool quiet() const { return quiet_; }

  // Bytes and packets read so far from capture `index`.
  void progress(size_t index, uint64_t packets, uint64_t bytes, bool finished = false);

  void finish();

private:
  void clear_progress();
  bool quiet_, progress_;
  uint64_t total_bytes_;
  size_t files_;
  std::vector<std::atomic<uint64_t>> positions_, packets_;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

}  // namespace iscsi_doctor::cli
