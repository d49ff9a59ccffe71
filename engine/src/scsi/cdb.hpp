// SPDX-License-Identifier: GPL-2.0-or-later
// SCSI command descriptor blocks and sense data (SPC-4/5, SBC-3/4, SSC, SMC, MMC), decoded by the
// SCSI table (table.def).
// Everything here decodes untrusted bytes: short input yields nullopt or "unknown", never a read
// past the end of the span.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "iscsi_doctor/scsi.hpp"

namespace iscsi_doctor::scsi {

enum class Direction : uint8_t { none, read, write };

// Opcodes 0x01, 0x07, 0x08, 0x0a, 0x10, 0x11, 0x19, 0x1b, 0x2b, 0x34 mean different things per
// device type; the type comes from INQUIRY byte 0 (see device_type_from_inquiry). Unknown → disk.
enum class DeviceType : uint8_t { disk, tape, cdrom, changer, other };
DeviceType device_type_from_inquiry(uint8_t peripheral_byte);  // INQUIRY data byte 0

struct Cdb {
  uint8_t opcode = 0;
  std::optional<uint8_t> service_action;  // 0x7f, 0x9e, 0x9f, 0xa3, 0xa4, 0x5e, 0x5f
  std::string_view name;                  // "READ(10)", "WRITE(16)", unknown → "0xNN"
  Direction dir = Direction::none;        // direction of the data transfer the CDB asks for
  std::optional<uint64_t> lba;            // first logical block (block commands)
  std::optional<uint32_t> blocks;         // transfer / verification / sync length in blocks
  std::optional<uint32_t> length_bytes;   // allocation or parameter-list length in bytes
  bool fua = false;                       // force unit access (writes/reads bypass cache)
  bool dpo = false;                       // disable page out
  bool fixed = false;                     // tape READ/WRITE(6): blocks is in fixed blocks, else bytes
  uint8_t cdb_length = 0;                 // from the group code; 0x7f: 8 + additional length
  bool known = false;                     // opcode recognised

  bool is_read_write() const { return lba.has_value() && (dir != Direction::none); }
};

// nullopt only when `cdb` is empty or shorter than the opcode's fixed CDB length.
std::optional<Cdb> decode_cdb(std::span<const uint8_t> cdb, DeviceType type = DeviceType::disk);

// Bytes of a CDB by its group code (SPC-4 §4.2.5.1): 6, 10, 12, 16; 0 for reserved/vendor groups
// and for 0x7f (whose length is 8 + byte 7).
uint8_t cdb_length_for_opcode(uint8_t opcode);

struct Sense {
  uint8_t response_code = 0;  // 0x70/0x71 fixed, 0x72/0x73 descriptor
  uint8_t key = 0;
  uint8_t asc = 0, ascq = 0;
  bool has_asc = false;                 // false when fixed-format data was too short to hold ASC/ASCQ
  bool deferred = false;                // 0x71/0x73: error from an earlier command
  std::optional<uint64_t> information;  // INFORMATION field when VALID (fixed) / descriptor 0x00
};

// Parses SCSI sense data (SPC-4 §4.5). nullopt for unknown response codes or < 3 (fixed) /
// < 4 (descriptor) bytes; additional-length fields never extend reads past the span.
std::optional<Sense> parse_sense(std::span<const uint8_t> sense_data);

// iSCSI puts a 2-byte big-endian SenseLength before the sense data in the data segment of a
// SCSI Response (RFC 7143 §11.4.7.2). Returns the sense bytes actually present (clipped to the
// span), empty when SenseLength is 0 or the segment is shorter than 2 bytes.
std::span<const uint8_t> iscsi_sense_bytes(std::span<const uint8_t> data_segment);
std::optional<Sense> parse_iscsi_sense(std::span<const uint8_t> data_segment);

}  // namespace iscsi_doctor::scsi
