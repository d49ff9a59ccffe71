// SPDX-License-Identifier: GPL-2.0-or-later
#include "scsi/cdb.hpp"

#include <algorithm>
#include <array>

#include "util/byte_reader.hpp"

namespace iscsi_doctor::scsi {
namespace {

// Checked big-endian field read at a fixed CDB offset; 0 when the CDB is too short.
uint64_t field(std::span<const uint8_t> b, size_t at, size_t n) {
  ByteReader r(b);
  r.skip(at);
  uint64_t v = 0;
  switch (n) {
    case 1:
      v = r.u8();
      break;
    case 2:
      v = r.be16();
      break;
    case 3:
      v = r.be24();
      break;
    case 4:
      v = r.be32();
      break;
    case 8:
      v = r.be64();
      break;
    default:
      return 0;
  }
  return r.ok() ? v : 0;
}
uint8_t byte_at(std::span<const uint8_t> b, size_t at) { return uint8_t(field(b, at, 1)); }

// "0x00".."0xff" for unknown opcodes, built once so the string_views stay valid.
struct HexNames {
  std::array<std::array<char, 5>, 256> s{};
  constexpr HexNames() {
    constexpr char d[] = "0123456789abcdef";
    for (int i = 0; i < 256; ++i)
      s[i] = {'0', 'x', d[i >> 4], d[i & 15], '\0'};
  }
};
constexpr HexNames kHex;
std::string_view hex_name(uint8_t op) { return std::string_view(kHex.s[op].data(), 4); }

// The table's rows (table.def) as data.
enum Devices : uint8_t {
  DISK = 1 << uint8_t(DeviceType::disk),
  TAPE = 1 << uint8_t(DeviceType::tape),
  CDROM = 1 << uint8_t(DeviceType::cdrom),
  CHANGER = 1 << uint8_t(DeviceType::changer),
  ALL = 0xff
};
enum class Data : uint8_t { NONE, READ, WRITE, BYTCHK, FMTDATA, ATA };
enum Flags : uint8_t { FUA_DPO = 1, DPO = 2, SA = 4, SA_7F = 8, RW6 = 16, RW6_TAPE = 32, LEN8 = 64 };

struct Operation {
  uint8_t opcode;
  int16_t service_action;  // -1: any
  uint8_t devices;
  std::string_view name;
  Data data;
  uint8_t lba_at, lba_bytes, blocks_at, blocks_bytes, alloc_at, alloc_bytes, flags;
};

constexpr Operation kOperations[] = {
#define OP(opcode, sa, devices, name, data, lba_at, lba_n, blocks_at, blocks_n, alloc_at, alloc_n, flags) \
  {opcode, sa, devices, name, Data::data, lba_at, lba_n, blocks_at, blocks_n, alloc_at, alloc_n, flags},
#include "scsi/table.def"
};

// Each opcode's first row (its rows are adjacent), or none.
struct OpIndex {
  std::array<uint8_t, 256> first{};
  constexpr OpIndex() {
    first.fill(0xff);
    for (size_t i = std::size(kOperations); i-- > 0;)
      first[kOperations[i].opcode] = uint8_t(i);
  }
};
constexpr OpIndex kIndex;
static_assert(std::size(kOperations) < 0xff);

const Operation* find_operation(uint8_t opcode, std::optional<uint8_t> sa, DeviceType type) {
  const uint8_t bit = type == DeviceType::other ? uint8_t(0) : uint8_t(1 << uint8_t(type));
  for (size_t i = kIndex.first[opcode]; i < std::size(kOperations) && kOperations[i].opcode == opcode; ++i) {
    const Operation& o = kOperations[i];
    if ((o.devices == ALL || (o.devices & bit)) && (o.service_action < 0 || (sa && *sa == o.service_action)))
      return &o;
  }
  return nullptr;
}

Direction direction(const Operation& o, std::span<const uint8_t> b) {
  const uint8_t b1 = byte_at(b, 1);
  switch (o.data) {
    case Data::READ:
      return Direction::read;
    case Data::WRITE:
      return Direction::write;
    case Data::BYTCHK:  // the initiator sends data to compare
      return (b1 & 0x06) ? Direction::write : Direction::none;
    case Data::FMTDATA:
      return (b1 & 0x10) ? Direction::write : Direction::none;
    case Data::ATA: {  // T_LENGTH (byte 2 bits 0-1) 0 means no data; T_DIR bit 3
      const uint8_t b2 = byte_at(b, 2);
      return (b2 & 0x03) == 0 ? Direction::none : (b2 & 0x08) ? Direction::read : Direction::write;
    }
    case Data::NONE:
      break;
  }
  return Direction::none;
}

}  // namespace

DeviceType device_type_from_inquiry(uint8_t peripheral_byte) {
  switch (peripheral_byte & 0x1f) {
    case 0x00:
    case 0x0e:
      return DeviceType::disk;  // SBC, RBC
    case 0x01:
      return DeviceType::tape;
    case 0x05:
      return DeviceType::cdrom;
    case 0x08:
      return DeviceType::changer;
    default:
      return DeviceType::other;
  }
}

uint8_t cdb_length_for_opcode(uint8_t opcode) {
  if (opcode == 0x7f) return 0;
  switch (opcode >> 5) {
    case 0:
      return 6;
    case 1:
    case 2:
      return 10;
    case 4:
      return 16;
    case 5:
      return 12;
    default:
      return 0;  // group 3 reserved, 6/7 vendor specific
  }
}

std::optional<Cdb> decode_cdb(std::span<const uint8_t> cdb, DeviceType type) {
  if (cdb.empty()) return std::nullopt;
  Cdb c;
  c.opcode = cdb[0];
  c.name = hex_name(c.opcode);
  c.cdb_length = cdb_length_for_opcode(c.opcode);
  if (c.opcode == 0x7f) {
    // Name only: the first 10 bytes suffice (in iSCSI the rest of a long CDB is in the AHS).
    if (cdb.size() < 10) return std::nullopt;
    c.cdb_length = uint8_t(std::min(255, 8 + byte_at(cdb, 7)));
  } else if (cdb.size() < c.cdb_length) {
    return std::nullopt;
  }

  const uint8_t b1 = byte_at(cdb, 1);
  std::optional<uint8_t> sa;
  if (c.opcode == 0x7f)
    sa = uint8_t(field(cdb, 8, 2) & 0xff);
  else if (const Operation* any = find_operation(c.opcode, std::nullopt, type); any && (any->flags & SA))
    sa = b1 & 0x1f;
  const Operation* o = find_operation(c.opcode, sa, type);
  if (!o) return c;
  c.name = o->name;
  c.dir = direction(*o, cdb);
  c.known = true;
  if (o->flags & (SA | SA_7F)) c.service_action = sa;
  if (o->lba_bytes) c.lba = field(cdb, o->lba_at, o->lba_bytes);
  if (o->blocks_bytes) c.blocks = uint32_t(field(cdb, o->blocks_at, o->blocks_bytes));
  if (o->alloc_bytes) c.length_bytes = uint32_t(field(cdb, o->alloc_at, o->alloc_bytes));
  if (o->flags & LEN8) c.length_bytes = 8;
  if (o->flags & FUA_DPO) c.fua = b1 & 0x08;
  if (o->flags & (FUA_DPO | DPO)) c.dpo = b1 & 0x10;
  if (o->flags & RW6) {  // SBC: 21-bit LBA, length 0 means 256 blocks
    *c.lba &= 0x1fffff;
    if (*c.blocks == 0) c.blocks = 256;
  }
  if (o->flags & RW6_TAPE) c.fixed = b1 & 0x01;  // SSC: blocks in fixed blocks, else bytes
  return c;
}

std::optional<Sense> parse_sense(std::span<const uint8_t> d) {
  ByteReader r(d);
  const uint8_t b0 = r.u8();
  if (!r.ok()) return std::nullopt;
  Sense s;
  s.response_code = b0 & 0x7f;
  s.deferred = s.response_code == 0x71 || s.response_code == 0x73;
  if (s.response_code == 0x70 || s.response_code == 0x71) {
    // Fixed format: key in byte 2, INFORMATION 3-6, additional length 7, ASC/ASCQ 12-13.
    r.skip(1);
    const uint8_t b2 = r.u8();
    if (!r.ok()) return std::nullopt;
    s.key = b2 & 0x0f;
    const uint32_t info = r.be32();
    if (r.ok() && (b0 & 0x80)) s.information = info;
    const uint8_t add_len = r.u8();
    r.skip(4);  // command-specific information
    const uint8_t asc = r.u8(), ascq = r.u8();
    // ASC/ASCQ count only when both present and covered by the additional length.
    if (r.ok() && add_len >= 6) {
      s.asc = asc;
      s.ascq = ascq;
      s.has_asc = true;
    }
    return s;
  }
  if (s.response_code == 0x72 || s.response_code == 0x73) {
    // Descriptor format: key, ASC, ASCQ in bytes 1-3, additional length in 7, descriptors from 8.
    s.key = r.u8() & 0x0f;
    s.asc = r.u8();
    s.ascq = r.u8();
    if (!r.ok()) return std::nullopt;
    s.has_asc = true;
    r.skip(3);
    const uint8_t add_len = r.u8();
    if (!r.ok()) return s;
    ByteReader desc(r.bytes(std::min<size_t>(add_len, r.remaining())));
    while (desc.ok() && desc.remaining() >= 2) {
      const uint8_t type = desc.u8(), len = desc.u8();
      ByteReader body(desc.bytes(len));
      if (!desc.ok()) break;
      if (type == 0x00 && len >= 0x0a) {  // Information descriptor: VALID, reserved, 8-byte INFORMATION
        const uint8_t valid = body.u8();
        body.skip(1);
        const uint64_t info = body.be64();
        if (body.ok() && (valid & 0x80)) s.information = info;
      }
    }
    return s;
  }
  return std::nullopt;
}

std::span<const uint8_t> iscsi_sense_bytes(std::span<const uint8_t> data_segment) {
  ByteReader r(data_segment);
  const uint16_t len = r.be16();
  if (!r.ok()) return {};
  return data_segment.subspan(2, std::min<size_t>(len, r.remaining()));
}

std::optional<Sense> parse_iscsi_sense(std::span<const uint8_t> data_segment) {
  const auto s = iscsi_sense_bytes(data_segment);
  if (s.empty()) return std::nullopt;
  return parse_sense(s);
}

}  // namespace iscsi_doctor::scsi
