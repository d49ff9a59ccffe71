// SPDX-License-Identifier: GPL-2.0-or-later
// Numbers, times, sizes and the capture point as people read them: the one set the text report,
// the HTML report and the SVG ladders all use, so the three never word the same fact differently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "input/decompress.hpp"
#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor::cli {

std::string ms_text(double ms);              // "63.9 ms", "0.019 ms", "1.25 s"; "-" when unknown (< 0)
std::string size_text(uint64_t bytes);       // transfer sizes, in binary units: "1 KiB", "255 B"
std::string file_size_text(uint64_t bytes);  // file sizes, in decimal units: "11.1 kB", "3.4 MB"
std::string count_text(uint64_t n);          // "1,234,567"
std::string frames_text(const std::vector<uint64_t>& frames);  // "12, 15, 40"
std::string hex32(uint32_t);  // "0x0000002a" (ITTs, as every output prints them)
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string compression_text(Compression);  // " (xz)", after the capture format's name; "" if none
// Where the capture point sat: "near the initiator", "near the target", "mid-path", "unknown".
std::string_view vantage_words(Vantage);

}  // namespace iscsi_doctor::cli
