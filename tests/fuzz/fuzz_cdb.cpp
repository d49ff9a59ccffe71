// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes CDB, sense and BHS decoding on arbitrary bytes.
#include <cstdint>
#include <span>
#include <string_view>

#include "iscsi/pdu.hpp"
#include "scsi/cdb.hpp"

using namespace iscsi_doctor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  for (auto t : {scsi::DeviceType::disk, scsi::DeviceType::tape, scsi::DeviceType::cdrom,
                 scsi::DeviceType::changer, scsi::DeviceType::other}) {
    if (const auto c = scsi::decode_cdb(in, t)) {
      if (c->name.empty() || c->opcode != data[0]) __builtin_trap();
      if (c->opcode != 0x7f && c->cdb_length > size) __builtin_trap();
    }
  }
  if (const auto s = scsi::parse_sense(in)) {
    if (s->key > 15) __builtin_trap();
    (void)scsi::sense_key_name(s->key);
    (void)scsi::asc_name(s->asc, s->ascq);
  }
  if (scsi::iscsi_sense_bytes(in).size() + 2 > size + 2) __builtin_trap();
  (void)scsi::parse_iscsi_sense(in);
  if (size) (void)scsi::status_name(data[0]);
  if (const auto b = iscsi::parse_bhs(in)) {
    for (bool ini : {true, false})
      for (bool strict : {true, false}) {
        const bool ok = iscsi::plausible_bhs(*b, ini, iscsi::kMaxDataSegmentLength, strict);
        if (ok != (std::string_view(
                       iscsi::implausible_reason(*b, ini, iscsi::kMaxDataSegmentLength, strict)) == "ok"))
          __builtin_trap();
      }
    (void)b->pdu_length(true, true);
    (void)iscsi::opcode_name(b->opcode);
  }
  return 0;
}
