// SPDX-License-Identifier: GPL-2.0-or-later
// The iSCSI Basic Header Segment (RFC 7143 §11.2.1): 48 bytes at the start of every PDU,
// decoded by value. Opcode-specific fields live in the generic words w20..w44 and in
// byte2/byte3; the named accessors below say which opcode each applies to (§11.3-§11.19).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace iscsi_doctor::iscsi {

enum class Opcode : uint8_t {
  NopOut = 0x00,
  ScsiCommand = 0x01,
  TaskMgmtRequest = 0x02,
  LoginRequest = 0x03,
  TextRequest = 0x04,
  DataOut = 0x05,
  LogoutRequest = 0x06,
  SnackRequest = 0x10,
  NopIn = 0x20,
  ScsiResponse = 0x21,
  TaskMgmtResponse = 0x22,
  LoginResponse = 0x23,
  TextResponse = 0x24,
  DataIn = 0x25,
  LogoutResponse = 0x26,
  R2T = 0x31,
  AsyncMessage = 0x32,
  Reject = 0x3f
};

inline constexpr size_t kBhsLength = 48;
inline constexpr uint32_t kMaxDataSegmentLength = 0xffffff;  // 24-bit field

const char* opcode_name(uint8_t opcode);   // "SCSI Command", "Data-In", ...; unknown → "Unknown"
bool is_known_opcode(uint8_t opcode);      // one of the Opcode values (low 6 bits)
bool is_initiator_opcode(uint8_t opcode);  // 0x00-0x1f initiator, 0x20-0x3f target (§11.2.1.2)

// Login PDUs are exchanged before digests take effect (RFC 7143 §13.1: digests apply in Full
// Feature Phase), so they never carry a header or data digest.
bool pdu_carries_digests(uint8_t opcode);

constexpr uint32_t pad4(uint32_t n) { return (n + 3u) & ~3u; }

struct Bhs {
  uint8_t opcode = 0;      // byte 0 bits 0-5
  bool immediate = false;  // byte 0 bit 6 (I); initiator PDUs only
  uint8_t byte0 = 0;       // raw, for reserved-bit checks
  uint8_t flags = 0;       // byte 1
  uint8_t byte2 = 0, byte3 = 0;
  uint8_t ahs_words = 0;     // TotalAHSLength in 4-byte words
  uint32_t data_length = 0;  // DataSegmentLength, excluding padding
  uint64_t lun = 0;          // bytes 8-15 (LUN, or ISID+TSIH for Login)
  uint32_t itt = 0;          // bytes 16-19
  uint32_t w20 = 0, w24 = 0, w28 = 0, w32 = 0, w36 = 0, w40 = 0, w44 = 0;
  std::array<uint8_t, 16> cdb{};  // bytes 32-47 (SCSI Command)

  Opcode op() const { return Opcode(opcode); }
  // The LUN as a number (SAM-5 §4.6): single-level peripheral or flat-space addressing gives its
  // 14-bit number; anything else stays the raw 8 bytes.
  uint64_t lun_number() const {
    const unsigned method = unsigned(lun >> 62);
    if ((method == 0 || method == 1) && (lun & 0x0000ffffffffffffull) == 0) return (lun >> 48) & 0x3fff;
    return lun;
  }
  bool final() const { return flags & 0x80; }  // F

  // Initiator PDUs: CmdSN and ExpStatSN (SCSI Command, NOP-Out, TMF, Login, Text, Logout).
  uint32_t cmdsn() const { return w24; }
  uint32_t exp_statsn() const { return w28; }
  // Target PDUs: StatSN, ExpCmdSN, MaxCmdSN (SCSI Response, Data-In, R2T, NOP-In, ...).
  uint32_t statsn() const { return w24; }
  uint32_t exp_cmdsn() const { return w28; }
  uint32_t max_cmdsn() const { return w32; }

  // SCSI Command (§11.3)
  bool read_bit() const { return flags & 0x40; }
  bool write_bit() const { return flags & 0x20; }
  uint8_t task_attr() const { return flags & 0x07; }
  uint32_t expected_length() const { return w20; }

  // Data-In (§11.7) / Data-Out (§11.8) / R2T (§11.8) / NOP (§11.18-19): Target Transfer Tag
  uint32_t ttt() const { return w20; }
  bool ack_bit() const { return flags & 0x40; }     // Data-In A
  bool status_bit() const { return flags & 0x01; }  // Data-In S
  uint32_t datasn() const { return w36; }           // Data-In / Data-Out
  uint32_t buffer_offset() const { return w40; }    // Data-In / Data-Out / R2T
  uint32_t r2tsn() const { return w36; }
  uint32_t desired_length() const { return w44; }  // R2T

  // SCSI Response (§11.4) and Data-In with S: status; residual flags and count
  uint8_t response() const { return byte2; }  // SCSI Response: 0 completed, 1 target failure
  uint8_t status() const { return byte3; }
  bool bidi_overflow() const { return flags & 0x10; }   // o
  bool bidi_underflow() const { return flags & 0x08; }  // u
  bool overflow() const { return flags & 0x04; }        // O
  bool underflow() const { return flags & 0x02; }       // U
  uint32_t exp_datasn() const { return w36; }           // SCSI Response, TMF Request
  uint32_t bidi_residual() const { return w40; }
  uint32_t residual() const { return w44; }

  // Task Management (§11.5, §11.6)
  uint8_t tmf_function() const { return flags & 0x7f; }
  uint32_t referenced_task_tag() const { return w20; }
  uint32_t ref_cmdsn() const { return w32; }
  uint8_t tmf_response() const { return byte2; }

  // Login (§11.12, §11.13)
  bool transit() const { return flags & 0x80; }       // T
  bool continue_bit() const { return flags & 0x40; }  // C (also Text)
  uint8_t csg() const { return (flags >> 2) & 0x03; }
  uint8_t nsg() const { return flags & 0x03; }
  uint8_t version_max() const { return byte2; }
  uint8_t version_min_or_active() const { return byte3; }  // request: Min, response: Active
  uint64_t isid() const { return lun >> 16; }              // 6 bytes
  uint16_t tsih() const { return uint16_t(lun & 0xffff); }
  uint16_t cid() const { return uint16_t(w20 >> 16); }  // Login / Logout request
  uint8_t status_class() const { return uint8_t(w36 >> 24); }
  uint8_t status_detail() const { return uint8_t(w36 >> 16); }

  // Logout (§11.14, §11.15)
  uint8_t logout_reason() const { return flags & 0x7f; }
  uint8_t logout_response() const { return byte2; }
  uint16_t time2wait() const { return uint16_t(w40 >> 16); }
  uint16_t time2retain() const { return uint16_t(w40 & 0xffff); }

  // Reject (§11.17), Async Message (§11.9), SNACK (§11.16)
  uint8_t reject_reason() const { return byte2; }
  uint8_t async_event() const { return uint8_t(w36 >> 24); }
  uint8_t snack_type() const { return flags & 0x0f; }

  uint32_t header_length(bool header_digest) const { return 48 + 4u * ahs_words + (header_digest ? 4 : 0); }
  // Whole PDU on the wire: BHS + AHS + digests + padded data (§11.2). The data digest is only
  // present with a non-empty data segment.
  uint32_t pdu_length(bool header_digest, bool data_digest) const {
    return header_length(header_digest) + pad4(data_length) + (data_digest && data_length ? 4 : 0);
  }
};

// Decodes the first 48 bytes; nullopt when fewer are given. Does not judge plausibility.
std::optional<Bhs> parse_bhs(std::span<const uint8_t> bytes);

// Whether `b` looks like a real header sent in this direction — used to find PDU boundaries
// again after lost bytes or a mid-stream start (strict), and to notice misframing while in sync
// (strict = false: only known opcode for the direction, byte 0 bit 7 clear, DataSegmentLength
// within the limit, so that odd but real implementations are not thrown out).
// Strict checks: known opcode for the direction; reserved
// bits/fields zero where RFC 7143 §11 requires it; DataSegmentLength <= max_data_length and 0
// where the PDU has no data segment; AHS only on SCSI Command; opcode-specific consistency
// (R/W bits vs Expected Data Transfer Length and CDB, S-bit rules on Data-In, login stages and
// version, known reasons/functions/status codes). Strict on purpose: a false "yes" inside
// payload data costs more than a false "no" (the next PDU will be found instead).
bool plausible_bhs(const Bhs& b, bool from_initiator, uint32_t max_data_length = kMaxDataSegmentLength,
                   bool strict = true);

// Same, returning the first failed check ("ok" when plausible) for diagnostics and tests.
const char* implausible_reason(const Bhs& b, bool from_initiator,
                               uint32_t max_data_length = kMaxDataSegmentLength, bool strict = true);

}  // namespace iscsi_doctor::iscsi
