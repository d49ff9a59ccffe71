// SPDX-License-Identifier: GPL-2.0-or-later
// Compressed captures: gzip, xz, zstd, lz4 (frame format) and bzip2, told apart by their magic
// bytes and decompressed as they are read, never unpacked to disk. Each format is decoded by its
// own library (zlib, liblzma, libzstd, liblz4, libbz2) behind one small interface, so that every
// format keeps its integrity checks and says in its own words what is wrong with the data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace iscsi_doctor::cli {

enum class Compression : uint8_t { none, gzip, xz, zstd, lz4, bzip2 };

constexpr size_t kMagicBytes = 6;  // the longest magic (xz's)

// The compression whose magic begins b[0..n) (none: the bytes are taken as they are).
Compression compression_of(const uint8_t* b, size_t n);
std::string_view compression_name(Compression);  // "gzip", "xz", "zstd", "lz4", "bzip2"

// What the decompressed FILE* met while reading: `error` when the data ends early or is corrupt
// (reading ends there), `warning` when bytes after the compressed data were ignored.
struct DecompressStatus {
  std::string error, warning;
  std::atomic<uint64_t> consumed = 0;  // compressed bytes taken from the source, for progress (another
                                       // thread may decompress: wiretap's feed, capture_streams.cpp)
};

// A FILE* that reads src (owned: closed with the result) decompressed; nullptr (src closed) when
// the decoder cannot start. status is updated as it reads.
FILE* decompressed_file(Compression, FILE* src, std::shared_ptr<DecompressStatus> status);

}  // namespace iscsi_doctor::cli
