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

struct Builder {
  Cdb c;
  std::span<const uint8_t> b;
  void named(std::string_view n, Direction d = Direction::none) {
    c.name = n;
    c.dir = d;
    c.known = true;
  }
  void alloc(size_t at, size_t n) { c.length_bytes = uint32_t(field(b, at, n)); }
  void lba_len(size_t lba_at, size_t lba_n, size_t len_at, size_t len_n) {
    c.lba = field(b, lba_at, lba_n);
    c.blocks = uint32_t(field(b, len_at, len_n));
  }
  void fua_dpo() {
    c.fua = byte_at(b, 1) & 0x08;
    c.dpo = byte_at(b, 1) & 0x10;
  }
};

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
  Builder k{Cdb{}, cdb};
  Cdb& c = k.c;
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
  using D = Direction;
  const bool tape = type == DeviceType::tape, changer = type == DeviceType::changer;
  switch (c.opcode) {
    case 0x00:
      k.named("TEST UNIT READY");
      break;
    case 0x01:
      k.named(tape ? "REWIND" : "REZERO UNIT");
      break;
    case 0x03:
      k.named("REQUEST SENSE", D::read);
      k.alloc(4, 1);
      break;
    case 0x04:
      k.named("FORMAT UNIT", (b1 & 0x10) ? D::write : D::none);
      break;  // FMTDATA
    case 0x05:
      k.named("READ BLOCK LIMITS", D::read);
      break;
    case 0x07:
      k.named(changer ? "INITIALIZE ELEMENT STATUS" : "REASSIGN BLOCKS", changer ? D::none : D::write);
      break;
    case 0x08:
    case 0x0a:
      k.named(c.opcode == 0x08 ? "READ(6)" : "WRITE(6)", c.opcode == 0x08 ? D::read : D::write);
      if (tape) {  // SSC: no LBA; 24-bit length in blocks (FIXED) or bytes
        c.fixed = b1 & 0x01;
        c.blocks = uint32_t(field(cdb, 2, 3));
      } else {  // SBC: 21-bit LBA, length 0 means 256 blocks
        c.lba = field(cdb, 1, 3) & 0x1fffff;
        const uint32_t n = byte_at(cdb, 4);
        c.blocks = n == 0 ? 256 : n;
      }
      break;
    case 0x10:
      k.named(tape ? "WRITE FILEMARKS(6)" : "0x10");
      c.known = tape;
      break;
    case 0x11:
      k.named(tape ? "SPACE(6)" : "0x11");
      c.known = tape;
      break;
    case 0x12:
      k.named("INQUIRY", D::read);
      k.alloc(3, 2);
      break;
    case 0x15:
      k.named("MODE SELECT(6)", D::write);
      k.alloc(4, 1);
      break;
    case 0x16:
      k.named("RESERVE(6)");
      break;
    case 0x17:
      k.named("RELEASE(6)");
      break;
    case 0x19:
      k.named(tape ? "ERASE(6)" : "0x19");
      c.known = tape;
      break;
    case 0x1a:
      k.named("MODE SENSE(6)", D::read);
      k.alloc(4, 1);
      break;
    case 0x1b:
      k.named(tape ? "LOAD UNLOAD" : "START STOP UNIT");
      break;
    case 0x1c:
      k.named("RECEIVE DIAGNOSTIC RESULTS", D::read);
      k.alloc(3, 2);
      break;
    case 0x1d:
      k.named("SEND DIAGNOSTIC", D::write);
      k.alloc(3, 2);
      break;
    case 0x1e:
      k.named("PREVENT ALLOW MEDIUM REMOVAL");
      break;
    case 0x23:
      k.named("READ FORMAT CAPACITIES", D::read);
      k.alloc(7, 2);
      break;
    case 0x25:
      k.named("READ CAPACITY(10)", D::read);
      c.length_bytes = 8;
      break;
    case 0x28:
      k.named("READ(10)", D::read);
      k.lba_len(2, 4, 7, 2);
      k.fua_dpo();
      break;
    case 0x2a:
      k.named("WRITE(10)", D::write);
      k.lba_len(2, 4, 7, 2);
      k.fua_dpo();
      break;
    case 0x2b:
      k.named(tape ? "LOCATE(10)" : changer ? "POSITION TO ELEMENT" : "SEEK(10)");
      break;
    case 0x2e:
      k.named("WRITE AND VERIFY(10)", D::write);
      k.lba_len(2, 4, 7, 2);
      c.dpo = b1 & 0x10;
      break;
    case 0x2f:  // BYTCHK != 0: the initiator sends data to compare
      k.named("VERIFY(10)", (b1 & 0x06) ? D::write : D::none);
      k.lba_len(2, 4, 7, 2);
      break;
    case 0x34:
      if (tape)
        k.named("READ POSITION", D::read);
      else {
        k.named("PRE-FETCH(10)");
        k.lba_len(2, 4, 7, 2);
      }
      break;
    case 0x35:
      k.named("SYNCHRONIZE CACHE(10)");
      k.lba_len(2, 4, 7, 2);
      break;
    case 0x37:
      k.named("READ DEFECT DATA(10)", D::read);
      k.alloc(7, 2);
      break;
    case 0x3b:
      k.named("WRITE BUFFER", D::write);
      k.alloc(6, 3);
      break;
    case 0x3c:
      k.named("READ BUFFER", D::read);
      k.alloc(6, 3);
      break;
    case 0x41:
      k.named("WRITE SAME(10)", D::write);
      k.lba_len(2, 4, 7, 2);
      break;
    case 0x42:
      k.named("UNMAP", D::write);
      k.alloc(7, 2);
      break;
    case 0x43:
      k.named("READ TOC/PMA/ATIP", D::read);
      k.alloc(7, 2);
      break;
    case 0x46:
      k.named("GET CONFIGURATION", D::read);
      k.alloc(7, 2);
      break;
    case 0x4a:
      k.named("GET EVENT STATUS NOTIFICATION", D::read);
      k.alloc(7, 2);
      break;
    case 0x4c:
      k.named("LOG SELECT", D::write);
      k.alloc(7, 2);
      break;
    case 0x4d:
      k.named("LOG SENSE", D::read);
      k.alloc(7, 2);
      break;
    case 0x51:
      k.named("READ DISC INFORMATION", D::read);
      k.alloc(7, 2);
      break;
    case 0x55:
      k.named("MODE SELECT(10)", D::write);
      k.alloc(7, 2);
      break;
    case 0x56:
      k.named("RESERVE(10)");
      break;
    case 0x57:
      k.named("RELEASE(10)");
      break;
    case 0x5a:
      k.named("MODE SENSE(10)", D::read);
      k.alloc(7, 2);
      break;
    case 0x5e:
      k.named("PERSISTENT RESERVE IN", D::read);
      c.service_action = b1 & 0x1f;
      k.alloc(7, 2);
      break;
    case 0x5f:
      k.named("PERSISTENT RESERVE OUT", D::write);
      c.service_action = b1 & 0x1f;
      k.alloc(5, 4);
      break;
    case 0x7f:  // variable length (OSD and others): name only
      k.named("VARIABLE LENGTH");
      c.service_action = uint8_t(field(cdb, 8, 2) & 0xff);
      break;
    case 0x83:
      k.named("EXTENDED COPY", D::write);
      k.alloc(10, 4);
      break;
    case 0x84:
      k.named("RECEIVE COPY RESULTS", D::read);
      k.alloc(10, 4);
      break;
    case 0x85:
    case 0xa1: {  // ATA PASS-THROUGH: T_LENGTH (byte 2 bits 0-1) 0 means no data; T_DIR bit 3
      if (c.opcode == 0xa1 && type == DeviceType::cdrom) {
        k.named("BLANK");
        break;
      }
      const uint8_t b2 = byte_at(cdb, 2);
      k.named(c.opcode == 0x85 ? "ATA PASS-THROUGH(16)" : "ATA PASS-THROUGH(12)", (b2 & 0x03) == 0 ? D::none
                                                                                  : (b2 & 0x08)    ? D::read
                                                                                                : D::write);
      break;
    }
    case 0x88:
      k.named("READ(16)", D::read);
      k.lba_len(2, 8, 10, 4);
      k.fua_dpo();
      break;
    case 0x89:  // the data is the verify and the write blocks: 2 x NUMBER OF LOGICAL BLOCKS
      k.named("COMPARE AND WRITE", D::write);
      k.lba_len(2, 8, 13, 1);
      k.fua_dpo();
      break;
    case 0x8a:
      k.named("WRITE(16)", D::write);
      k.lba_len(2, 8, 10, 4);
      k.fua_dpo();
      break;
    case 0x8e:
      k.named("WRITE AND VERIFY(16)", D::write);
      k.lba_len(2, 8, 10, 4);
      c.dpo = b1 & 0x10;
      break;
    case 0x8f:
      k.named("VERIFY(16)", (b1 & 0x06) ? D::write : D::none);
      k.lba_len(2, 8, 10, 4);
      break;
    case 0x91:
      k.named("SYNCHRONIZE CACHE(16)");
      k.lba_len(2, 8, 10, 4);
      break;
    case 0x93:
      k.named("WRITE SAME(16)", D::write);
      k.lba_len(2, 8, 10, 4);
      break;
    case 0x9e:
      c.service_action = b1 & 0x1f;
      if (*c.service_action == 0x10) {
        k.named("READ CAPACITY(16)", D::read);
        k.alloc(10, 4);
      } else if (*c.service_action == 0x12) {
        k.named("GET LBA STATUS", D::read);
        c.lba = field(cdb, 2, 8);
        k.alloc(10, 4);
      } else {
        k.named("SERVICE ACTION IN(16)", D::read);
        k.alloc(10, 4);
      }
      break;
    case 0xa0:
      k.named("REPORT LUNS", D::read);
      k.alloc(6, 4);
      break;
    case 0xa3:
      c.service_action = b1 & 0x1f;
      switch (*c.service_action) {
        case 0x0a:
          k.named("REPORT TARGET PORT GROUPS", D::read);
          break;
        case 0x0c:
          k.named("REPORT SUPPORTED OPERATION CODES", D::read);
          break;
        case 0x0d:
          k.named("REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS", D::read);
          break;
        default:
          k.named("MAINTENANCE IN", D::read);
          break;
      }
      k.alloc(6, 4);
      break;
    case 0xa4:
      c.service_action = b1 & 0x1f;
      k.named(*c.service_action == 0x0a ? "SET TARGET PORT GROUPS" : "MAINTENANCE OUT", D::write);
      k.alloc(6, 4);
      break;
    case 0xa5:
      k.named(type == DeviceType::cdrom ? "PLAY AUDIO(12)" : "MOVE MEDIUM");
      break;
    case 0xa8:
      k.named("READ(12)", D::read);
      k.lba_len(2, 4, 6, 4);
      k.fua_dpo();
      break;
    case 0xaa:
      k.named("WRITE(12)", D::write);
      k.lba_len(2, 4, 6, 4);
      k.fua_dpo();
      break;
    case 0xad:
      k.named("READ DISC STRUCTURE", D::read);
      k.alloc(8, 2);
      break;
    case 0xaf:
      k.named("VERIFY(12)", (b1 & 0x06) ? D::write : D::none);
      k.lba_len(2, 4, 6, 4);
      break;
    case 0xb8:
      k.named("READ ELEMENT STATUS", D::read);
      k.alloc(7, 3);
      break;
    case 0xbb:
      k.named("SET CD SPEED");
      break;
    case 0xbe:
      k.named("READ CD", D::read);
      k.lba_len(2, 4, 6, 3);
      break;
    default:
      break;
  }
  return c;
}

const char* status_name(uint8_t status) {
  switch (status) {
    case 0x00:
      return "GOOD";
    case 0x02:
      return "CHECK CONDITION";
    case 0x04:
      return "CONDITION MET";
    case 0x08:
      return "BUSY";
    case 0x10:
      return "INTERMEDIATE";
    case 0x14:
      return "INTERMEDIATE-CONDITION MET";
    case 0x18:
      return "RESERVATION CONFLICT";
    case 0x22:
      return "COMMAND TERMINATED";
    case 0x28:
      return "TASK SET FULL";
    case 0x30:
      return "ACA ACTIVE";
    case 0x40:
      return "TASK ABORTED";
    default:
      return "Unknown";
  }
}

bool status_known(uint8_t status) { return std::string_view(status_name(status)) != "Unknown"; }

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

const char* sense_key_name(uint8_t key) {
  static constexpr const char* kNames[16] = {
      "NO SENSE",       "RECOVERED ERROR", "NOT READY",      "MEDIUM ERROR",
      "HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT",
      "BLANK CHECK",    "VENDOR SPECIFIC", "COPY ABORTED",   "ABORTED COMMAND",
      "RESERVED (0xC)", "VOLUME OVERFLOW", "MISCOMPARE",     "COMPLETED"};
  return key < 16 ? kNames[key] : "Unknown";
}

const char* asc_name(uint8_t asc, uint8_t ascq) {
  struct Entry {
    uint8_t asc, ascq;
    const char* name;
  };
  static constexpr Entry kTable[] = {
      {0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION"},
      {0x00, 0x01, "FILEMARK DETECTED"},
      {0x00, 0x02, "END-OF-PARTITION/MEDIUM DETECTED"},
      {0x00, 0x04, "BEGINNING-OF-PARTITION/MEDIUM DETECTED"},
      {0x00, 0x05, "END-OF-DATA DETECTED"},
      {0x04, 0x00, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE"},
      {0x04, 0x01, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY"},
      {0x04, 0x02, "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED"},
      {0x04, 0x03, "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED"},
      {0x04, 0x0a, "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION"},
      {0x04, 0x0b, "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE"},
      {0x04, 0x0c, "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE"},
      {0x0c, 0x00, "WRITE ERROR"},
      {0x11, 0x00, "UNRECOVERED READ ERROR"},
      {0x1a, 0x00, "PARAMETER LIST LENGTH ERROR"},
      {0x1d, 0x00, "MISCOMPARE DURING VERIFY OPERATION"},
      {0x20, 0x00, "INVALID COMMAND OPERATION CODE"},
      {0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE"},
      {0x24, 0x00, "INVALID FIELD IN CDB"},
      {0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED"},
      {0x26, 0x00, "INVALID FIELD IN PARAMETER LIST"},
      {0x27, 0x00, "WRITE PROTECTED"},
      {0x28, 0x00, "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED"},
      {0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"},
      {0x29, 0x01, "POWER ON OCCURRED"},
      {0x29, 0x02, "SCSI BUS RESET OCCURRED"},
      {0x29, 0x03, "BUS DEVICE RESET FUNCTION OCCURRED"},
      {0x29, 0x07, "I_T NEXUS LOSS OCCURRED"},
      {0x2a, 0x01, "MODE PARAMETERS CHANGED"},
      {0x2a, 0x03, "RESERVATIONS PREEMPTED"},
      {0x2a, 0x06, "ASYMMETRIC ACCESS STATE CHANGED"},
      {0x2a, 0x09, "CAPACITY DATA HAS CHANGED"},
      {0x2c, 0x00, "COMMAND SEQUENCE ERROR"},
      {0x3a, 0x00, "MEDIUM NOT PRESENT"},
      {0x3e, 0x02, "TIMEOUT ON LOGICAL UNIT"},
      {0x3f, 0x0e, "REPORTED LUNS DATA HAS CHANGED"},
      {0x44, 0x00, "INTERNAL TARGET FAILURE"},
      {0x47, 0x00, "SCSI PARITY ERROR"},
      {0x47, 0x05, "PROTOCOL SERVICE CRC ERROR"},
      {0x4b, 0x00, "DATA PHASE ERROR"},
      {0x55, 0x03, "INSUFFICIENT RESOURCES"},
      {0x5d, 0x00, "FAILURE PREDICTION THRESHOLD EXCEEDED"},
  };
  for (const auto& e : kTable)
    if (e.asc == asc && e.ascq == ascq) return e.name;
  return nullptr;
}

}  // namespace iscsi_doctor::scsi
