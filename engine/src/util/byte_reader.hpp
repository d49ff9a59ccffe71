// SPDX-License-Identifier: GPL-2.0-or-later
// One checked reader for all wire data: every read checks the remaining length first,
// so a short or corrupt buffer ends in ok() == false, never in a read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace iscsi_doctor {

class ByteReader {
public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool ok() const { return ok_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return ok_ ? bytes_.size() - pos_ : 0; }

  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint16_t be16() { return static_cast<uint16_t>(take(2)); }
  uint32_t be24() { return static_cast<uint32_t>(take(3)); }
  uint32_t be32() { return static_cast<uint32_t>(take(4)); }
  uint64_t be64() { return take(8); }

  // Returns an empty span (and fails the reader) when fewer than n bytes remain.
  std::span<const uint8_t> bytes(size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  void skip(size_t n) { (void)bytes(n); }

private:
  uint64_t take(size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v = (v << 8) | bytes_[pos_ + i];
    pos_ += n;
    return v;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Big-endian loads from a span the caller has already length-checked.
inline uint32_t load_be32(std::span<const uint8_t> b, size_t at) {
  return (uint32_t(b[at]) << 24) | (uint32_t(b[at + 1]) << 16) | (uint32_t(b[at + 2]) << 8) | b[at + 3];
}
inline uint32_t load_be24(std::span<const uint8_t> b, size_t at) {
  return (uint32_t(b[at]) << 16) | (uint32_t(b[at + 1]) << 8) | b[at + 2];
}
inline uint16_t load_be16(std::span<const uint8_t> b, size_t at) {
  return uint16_t((b[at] << 8) | b[at + 1]);
}

}  // namespace iscsi_doctor
