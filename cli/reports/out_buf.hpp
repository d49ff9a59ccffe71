// SPDX-License-Identifier: GPL-2.0-or-later
// An append-only text buffer for the writers that format a record per command (JSON, JSON Lines,
// CSV): its appends are inline and check room once, where fmt's memory_buffer took a quarter of the
// JSON formatting thread (docs/performance.md).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace iscsi_doctor::cli {

class OutBuf {
public:
  OutBuf& operator+=(char c) {
    *room(1) = c;
    ++size_;
    return *this;
  }
  OutBuf& operator+=(std::string_view s) {
    std::memcpy(room(s.size()), s.data(), s.size());
    size_ += s.size();
    return *this;
  }
  // An unsigned or signed integer in decimal.
  template <typename T>
  void number(T v) {
    char* p = room(24);
    size_ = size_t(std::to_chars(p, p + 24, v).ptr - buf_.get());
  }
  // 0x and eight lowercase hex digits (an ITT).
  void hex08(uint32_t v) {
    char* p = room(10);
    p[0] = '0';
    p[1] = 'x';
    for (int i = 9; i >= 2; --i, v >>= 4)
      p[i] = "0123456789abcdef"[v & 0xf];
    size_ += 10;
  }
  // Anything else through fmt (a compiled format string), by way of fmt's own buffer: fmt's
  // bounded writer (format_to_n) is several times slower.
  template <typename S, typename... T>
  void format(const S& f, const T&... args) {
    thread_local fmt::memory_buffer scratch;
    scratch.clear();
    fmt::format_to(fmt::appender(scratch), f, args...);
    *this += std::string_view(scratch.data(), scratch.size());
  }
  void clear() { size_ = 0; }
  const char* data() const { return buf_.get(); }
  size_t size() const { return size_; }

private:
  char* room(size_t n) {
    if (cap_ - size_ < n) grow(n);
    return buf_.get() + size_;
  }
  void grow(size_t n) {
    size_t cap = cap_ ? cap_ * 2 : 1024;
    while (cap - size_ < n)
      cap *= 2;
    auto b = std::make_unique<char[]>(cap);
    if (size_) std::memcpy(b.get(), buf_.get(), size_);
    buf_ = std::move(b);
    cap_ = cap;
  }
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0, cap_ = 0;
};

}  // namespace iscsi_doctor::cli
