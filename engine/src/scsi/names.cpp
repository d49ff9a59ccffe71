// SPDX-License-Identifier: GPL-2.0-or-later
// Status, sense key and ASC/ASCQ names, read from the SCSI table.
#include <algorithm>
#include <array>
#include <iterator>

#include "iscsi_doctor/scsi.hpp"

namespace iscsi_doctor::scsi {
namespace {

constexpr std::array<std::string_view, 256> statuses() {
  std::array<std::string_view, 256> s{};
#define STATUS(code, name) s[code] = name;
#include "scsi/table.def"
  return s;
}
constexpr auto kStatuses = statuses();

constexpr std::array<std::string_view, 16> sense_keys() {
  std::array<std::string_view, 16> s{};
#define SENSE_KEY(code, name) s[code] = name;
#include "scsi/table.def"
  return s;
}
constexpr auto kSenseKeys = sense_keys();

struct AscName {
  uint16_t code;  // ASC << 8 | ASCQ
  std::string_view name;
};
constexpr AscName kAscNames[] = {
#define ASC(asc, ascq, name) {uint16_t((asc) << 8 | (ascq)), name},
#include "scsi/table.def"
};
constexpr bool sorted() {
  for (size_t i = 1; i < std::size(kAscNames); ++i)
    if (kAscNames[i - 1].code >= kAscNames[i].code) return false;
  return true;
}
static_assert(sorted(), "table.def: ASC rows are sorted by ASC, ASCQ");

}  // namespace

std::string_view status_name(uint8_t status) { return kStatuses[status]; }
bool status_known(uint8_t status) { return !kStatuses[status].empty(); }
std::string_view sense_key_name(uint8_t key) { return kSenseKeys[key & 0x0f]; }

std::string_view asc_name(uint8_t asc, uint8_t ascq) {
  if (asc >= 0x80) return "VENDOR SPECIFIC";
  const uint16_t code = uint16_t(asc << 8 | ascq);
  const auto it = std::lower_bound(std::begin(kAscNames), std::end(kAscNames), code,
                                   [](const AscName& a, uint16_t c) { return a.code < c; });
  return it != std::end(kAscNames) && it->code == code ? it->name : std::string_view();
}

}  // namespace iscsi_doctor::scsi
