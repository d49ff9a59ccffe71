// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/pdu.hpp"

#include <algorithm>

#include "scsi/cdb.hpp"
#include "util/byte_reader.hpp"

namespace iscsi_doctor::iscsi {

const char* opcode_name(uint8_t opcode) {
  switch (opcode & 0x3f) {
    case 0x00:
      return "NOP-Out";
    case 0x01:
      return "SCSI Command";
    case 0x02:
      return "Task Management Request";
    case 0x03:
      return "Login Request";
    case 0x04:
      return "Text Request";
    case 0x05:
      return "Data-Out";
    case 0x06:
      return "Logout Request";
    case 0x10:
      return "SNACK Request";
    case 0x20:
      return "NOP-In";
    case 0x21:
      return "SCSI Response";
    case 0x22:
      return "Task Management Response";
    case 0x23:
      return "Login Response";
    case 0x24:
      return "Text Response";
    case 0x25:
      return "Data-In";
    case 0x26:
      return "Logout Response";
    case 0x31:
      return "R2T";
    case 0x32:
      return "Async Message";
    case 0x3f:
      return "Reject";
    default:
      return "Unknown";
  }
}

bool is_known_opcode(uint8_t opcode) { return opcode <= 0x3f && opcode_name(opcode)[0] != 'U'; }
bool is_initiator_opcode(uint8_t opcode) { return (opcode & 0x20) == 0; }
bool pdu_carries_digests(uint8_t opcode) {
  return opcode != uint8_t(Opcode::LoginRequest) && opcode != uint8_t(Opcode::LoginResponse);
}

std::optional<Bhs> parse_bhs(std::span<const uint8_t> bytes) {
  // One length check for the 48 bytes, then plain loads (a header is parsed per PDU: the hot path).
  if (bytes.size() < 48) return std::nullopt;
  Bhs b;
  b.byte0 = bytes[0];
  b.opcode = b.byte0 & 0x3f;
  b.immediate = b.byte0 & 0x40;
  b.flags = bytes[1];
  b.byte2 = bytes[2];
  b.byte3 = bytes[3];
  b.ahs_words = bytes[4];
  b.data_length = load_be24(bytes, 5);
  b.lun = uint64_t(load_be32(bytes, 8)) << 32 | load_be32(bytes, 12);
  b.itt = load_be32(bytes, 16);
  b.w20 = load_be32(bytes, 20);
  b.w24 = load_be32(bytes, 24);
  b.w28 = load_be32(bytes, 28);
  b.w32 = load_be32(bytes, 32);
  b.w36 = load_be32(bytes, 36);
  b.w40 = load_be32(bytes, 40);
  b.w44 = load_be32(bytes, 44);
  // The CDB overlays words 32..44 (§11.3.5).
  std::copy_n(bytes.begin() + 32, 16, b.cdb.begin());
  return b;
}

namespace {

constexpr const char* kOk = "ok";

// Task management functions 1-8 (RFC 7143 §11.5.1) and 9-12 added by RFC 7144 §4.5.
bool known_tmf(uint8_t f) { return f >= 1 && f <= 12; }

const char* check(const Bhs& b, bool from_initiator, uint32_t max_data_length, bool strict) {
  const uint8_t op = b.opcode;
  if (!is_known_opcode(op)) return "unknown opcode";
  if (is_initiator_opcode(op) != from_initiator) return "opcode from the wrong direction";
  if (b.byte0 & 0x80) return "reserved bit 7 of byte 0 set";
  if (b.data_length > max_data_length) return "DataSegmentLength above limit";
  // The longest valid AHS: an extended CDB (248 bytes) and a bidirectional read length (8).
  if (b.ahs_words > 64) return "TotalAHSLength above 256 bytes";
  if (!strict) return kOk;
  if (!from_initiator && (b.byte0 & 0x40)) return "I bit set on a target PDU";
  // Only SCSI Command defines AHS types (§11.2.2: extended CDB, bidirectional read length).
  if (b.ahs_words != 0 && op != uint8_t(Opcode::ScsiCommand)) return "AHS on a PDU that has none";
  const uint32_t lo16 = 0xffff;

  switch (Opcode(op)) {
    case Opcode::NopOut:  // §11.18: byte 1 is 0x80, bytes 2-3 and 32-47 reserved
      if (b.flags != 0x80 || b.byte2 || b.byte3) return "NOP-Out flags";
      if (b.w32 || b.w36 || b.w40 || b.w44) return "NOP-Out reserved words";
      if (b.itt == 0xffffffff && b.ttt() == 0xffffffff) return "NOP-Out without ITT or TTT";
      return kOk;
    case Opcode::ScsiCommand: {  // §11.3
      if (b.flags & 0x18) return "SCSI Command reserved flags";
      if (b.byte2) return "SCSI Command reserved byte 2";
      const bool r = b.read_bit(), w = b.write_bit();
      // §11.3.1.1: with neither R nor W the Expected Data Transfer Length MUST be 0.
      if (!r && !w && b.expected_length() != 0) return "no R/W bit but a transfer length";
      // Immediate data is write data (§11.3.4) and cannot exceed the expected length.
      if (b.data_length && !w) return "data segment on a non-write command";
      if (b.data_length > b.expected_length() && !(r && w)) return "immediate data above expected length";
      // F = 0 announces unsolicited Data-Out, which only a write can have.
      if (!b.final() && !w) return "F clear on a non-write command";
      if (const auto cdb = scsi::decode_cdb(b.cdb); cdb && cdb->known && b.ahs_words == 0) {
        using scsi::Direction;
        if (cdb->dir == Direction::read && w && !r) return "write bit on a read CDB";
        if (cdb->dir == Direction::write && r && !w) return "read bit on a write CDB";
        if (cdb->dir == Direction::none && (r || w) && cdb->opcode != 0x7f) return "R/W bit on a no-data CDB";
      }
      return kOk;
    }
    case Opcode::TaskMgmtRequest:  // §11.5
      if (!(b.flags & 0x80) || !known_tmf(b.tmf_function())) return "TMF function";
      if (b.byte2 || b.byte3 || b.data_length) return "TMF reserved fields";
      if (b.w40 || b.w44) return "TMF reserved words";
      return kOk;
    case Opcode::LoginRequest:     // §11.12
    case Opcode::LoginResponse: {  // §11.13
      if (op == uint8_t(Opcode::LoginRequest) && !b.immediate) return "Login Request without I bit";
      if ((b.flags & 0xc0) == 0xc0) return "Login T and C both set";
      if (b.flags & 0x30) return "Login reserved flags";
      if (b.csg() == 2 || (b.transit() && (b.nsg() == 2 || b.nsg() <= b.csg()))) return "Login stages";
      // §11.12.5: an all-zero ISID is no real initiator's; ISID type 3 is reserved.
      if (b.isid() == 0 || (b.isid() >> 46) == 3) return "Login ISID";
      if (b.version_max() != 0 || b.version_min_or_active() != 0) return "Login version";
      if (b.w40 || b.w44) return "Login reserved words";
      if (op == uint8_t(Opcode::LoginRequest)) {
        if (b.w20 & lo16) return "Login Request reserved bytes 22-23";
        if (b.w32 || b.w36) return "Login Request reserved words";
      } else {
        if (b.w20) return "Login Response reserved word 20";
        if (b.status_class() > 3 || (b.w36 & lo16)) return "Login Response status";
      }
      return kOk;
    }
    case Opcode::TextRequest:   // §11.10
    case Opcode::TextResponse:  // §11.11
      // F and C together are a protocol error; neither (more requests to come, nothing
      // continued) is legal but unseen in practice and is what zero-filled data looks like.
      if ((b.flags & 0x3f) || (b.flags & 0xc0) == 0xc0 || (b.flags & 0xc0) == 0) return "Text flags";
      if (b.itt == 0xffffffff) return "Text reserved ITT";
      if (b.byte2 || b.byte3) return "Text reserved bytes";
      if (b.w36 || b.w40 || b.w44) return "Text reserved words";
      if (op == uint8_t(Opcode::TextRequest) && b.w32) return "Text Request reserved word 32";
      return kOk;
    case Opcode::DataOut:  // §11.7
      if (b.flags & 0x7f) return "Data-Out flags";
      if (b.byte2 || b.byte3) return "Data-Out reserved bytes";
      if (b.w24 || b.w32 || b.w44) return "Data-Out reserved words";
      if (b.data_length == 0 || b.itt == 0xffffffff) return "Data-Out without data or task";
      if (uint64_t(b.buffer_offset()) + b.data_length > 0xffffffffull) return "Data-Out offset";
      return kOk;
    case Opcode::LogoutRequest:  // §11.14
      if (!(b.flags & 0x80) || b.logout_reason() > 2) return "Logout reason";
      if (b.byte2 || b.byte3 || b.data_length) return "Logout reserved fields";
      if ((b.w20 & lo16) || b.w32 || b.w36 || b.w40 || b.w44) return "Logout reserved words";
      return kOk;
    case Opcode::SnackRequest:  // §11.16
      if ((b.flags & 0xf0) != 0x80 || b.snack_type() > 3) return "SNACK type";
      if (b.byte2 || b.byte3 || b.data_length) return "SNACK reserved fields";
      if (b.w24 || b.w32 || b.w36) return "SNACK reserved words";
      return kOk;
    case Opcode::NopIn:  // §11.19
      if (b.flags != 0x80 || b.byte2 || b.byte3) return "NOP-In flags";
      if (b.w36 || b.w40 || b.w44) return "NOP-In reserved words";
      return kOk;
    case Opcode::ScsiResponse:  // §11.4
      if (!(b.flags & 0x80) || (b.flags & 0x61)) return "SCSI Response flags";
      if ((b.flags & 0x06) == 0x06 || (b.flags & 0x18) == 0x18) return "SCSI Response O and U both set";
      if (b.response() > 1 && b.response() < 0x80) return "SCSI Response code";
      if (b.response() == 0 && !scsi::status_known(b.status())) return "SCSI Response status";
      if (b.ahs_words || b.lun) return "SCSI Response reserved fields";
      return kOk;
    case Opcode::TaskMgmtResponse:  // §11.6
      if (b.flags != 0x80 || (b.byte2 > 6 && b.byte2 != 255) || b.byte3) return "TMF Response code";
      if (b.data_length || b.lun || b.w20 || b.w36 || b.w40 || b.w44) return "TMF Response reserved";
      return kOk;
    case Opcode::DataIn: {  // §11.7
      if (b.flags & 0x38) return "Data-In reserved flags";
      if (b.byte2) return "Data-In reserved byte 2";
      if (b.status_bit()) {
        // §11.7.3: S requires F; status must be a real SAM status.
        if (!b.final() || !scsi::status_known(b.status())) return "Data-In status";
        if ((b.flags & 0x06) == 0x06) return "Data-In O and U both set";
      } else if (b.status() || (b.flags & 0x06)) {
        return "Data-In status fields without S";
      } else if (b.data_length == 0) {
        return "Data-In without data or status";
      }
      if (b.itt == 0xffffffff) return "Data-In reserved ITT";
      if (uint64_t(b.buffer_offset()) + b.data_length > 0xffffffffull) return "Data-In offset";
      return kOk;
    }
    case Opcode::LogoutResponse:  // §11.15
      if (b.flags != 0x80 || b.byte2 > 3 || b.byte3) return "Logout Response code";
      if (b.data_length || b.lun || b.w20 || b.w36 || b.w44) return "Logout Response reserved";
      return kOk;
    case Opcode::R2T:  // §11.8
      if (b.flags != 0x80 || b.byte2 || b.byte3 || b.data_length) return "R2T flags";
      if (b.desired_length() == 0 || b.ttt() == 0xffffffff) return "R2T length or tag";
      if (uint64_t(b.buffer_offset()) + b.desired_length() > 0xffffffffull) return "R2T offset";
      return kOk;
    case Opcode::AsyncMessage:  // §11.9
      if (b.flags != 0x80 || b.byte2 || b.byte3) return "Async flags";
      if (b.itt != 0xffffffff || b.w20 || b.w44) return "Async reserved fields";
      if (b.async_event() > 4 && b.async_event() != 255) return "Async event";
      return kOk;
    case Opcode::Reject:  // §11.17: the data segment holds the rejected header
      if (b.flags != 0x80 || b.byte3) return "Reject flags";
      if (b.reject_reason() < 1 || b.reject_reason() > 0x0c) return "Reject reason";
      if (b.lun || b.itt != 0xffffffff || b.w20 || b.w40 || b.w44) return "Reject reserved fields";
      if (b.data_length < kBhsLength) return "Reject without the rejected header";
      return kOk;
  }
  return "unknown opcode";
}

}  // namespace

const char* implausible_reason(const Bhs& b, bool from_initiator, uint32_t max_data_length, bool strict) {
  return check(b, from_initiator, max_data_length, strict);
}

bool plausible_bhs(const Bhs& b, bool from_initiator, uint32_t max_data_length, bool strict) {
  return check(b, from_initiator, max_data_length, strict) == kOk;
}

}  // namespace iscsi_doctor::iscsi
