// SPDX-License-Identifier: GPL-2.0-or-later
// What the engine made of each segment, for front-ends that draw an exchange (the CLI's ladder
// diagrams): which PDUs began in it and which command's critical path it moved, with the half
// trips counted so far (docs/rules.md "Round trips"). Given only to a Tracer set on the Analyzer,
// so a report pays one test per event for it.
#pragma once

#include <cstdint>

namespace iscsi_doctor {

// A PDU the framer found: told when its header is found (last_frame 0) and again when its last
// byte is in (a PDU framed late, as after a mid-session join, is placed at the segments that
// carried it).
struct PduTrace {
  uint32_t connection = 0;
  bool from_initiator = false;
  uint64_t first_frame = 0;  // the segment carrying its first byte (0: that segment was lost)
  uint64_t last_frame = 0;   // and its last byte (0: not yet in)
  uint8_t opcode = 0;        // BHS byte 0, without the immediate bit
  uint8_t flags = 0;         // BHS byte 1 (Data-In's S bit: status in this PDU)
  uint32_t itt = 0;
};

// A segment that carried bytes of a command (an event of its critical path), or a resend that
// cost the command a round trip.
struct PathTrace {
  uint32_t connection = 0;
  bool from_initiator = false;
  uint64_t frame = 0;
  uint32_t itt = 0;
  uint64_t command_first_frame = 0;
  int half_trips = 0;  // the command's half trips in this segment's direction, this event counted
};

class Tracer {
public:
  virtual ~Tracer() = default;
  virtual void on_pdu(const PduTrace&) {}
  virtual void on_path(const PathTrace&) {}
};

}  // namespace iscsi_doctor
