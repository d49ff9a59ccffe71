// SPDX-License-Identifier: GPL-2.0-or-later
#include "commands/console.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace iscsi_doctor::cli {

void Console::message(const std::string& line) {
  std::lock_guard lock(mu_);
  clear_progress();
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
}

void Console::progress(size_t index, uint64_t packets, uint64_t bytes, bool finished) {
  if (!progress_) return;
  positions_[index].store(bytes, std::memory_order_relaxed);
  packets_[index].store(packets, std::memory_order_relaxed);
  if (finished) done_.fetch_add(1, std::memory_order_relaxed);
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock || now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  uint64_t b = 0, p = 0;
  for (size_t i = 0; i < files_; ++i) {
    b += positions_[i].load(std::memory_order_relaxed);
    p += packets_[i].load(std::memory_order_relaxed);
  }
  const double pct = total_bytes_ ? 100.0 * double(std::min(b, total_bytes_)) / double(total_bytes_) : 0;
  std::string line = fmt::format("\r\033[K{:5.1f}%  {} packets", pct, p);
  if (files_ > 1) line += fmt::format("  {}/{} files", done_.load(std::memory_order_relaxed), files_);
  std::fputs(line.c_str(), stderr);
  shown_ = true;
}

void Console::finish() {
  std::lock_guard lock(mu_);
  clear_progress();
}

void Console::clear_progress() {
  if (shown_) std::fputs("\r\033[K", stderr);
  shown_ = false;
}

}  // namespace iscsi_doctor::cli
