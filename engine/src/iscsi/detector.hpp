// SPDX-License-Identifier: GPL-2.0-or-later
// iSCSI on a port not known to carry it, in a connection joined mid-session (no SYN, no login):
// recognised from PDU structure in both directions (docs/rules.md "Ports").
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace iscsi_doctor::iscsi {

class StreamDetector {
public:
  enum class Verdict : uint8_t { undecided, iscsi, not_iscsi };
  // One segment's payload from side 0 or 1 (side 0 sent the first payload seen).
  Verdict feed(int side, std::span<const uint8_t> payload);
  Verdict verdict() const { return verdict_; }
  int initiator_side() const { return initiator_side_; }  // once iscsi
  // A header at the start of `bytes` that passes the strict checks for its opcode's direction:
  // what a connection's first payload must show to be judged at all.
  static bool starts_with_header(std::span<const uint8_t> bytes);

  static constexpr int kAnswersNeeded = 2;     // commands answered by ITT from the other side
  static constexpr int kHeadersMax = 64;       // segments that begin with a header, before giving up
  static constexpr int kSegmentsMax = 4096;    // payload segments in all (large transfers between)
  static constexpr size_t kCommandsKept = 16;  // ITTs of commands awaiting an answer, per side

private:
  // Walks the PDUs that start the payload; false when one points at a header that is not one.
  bool walk(int side, std::span<const uint8_t> payload);
  bool saw_header_ = false;  // the last payload walked began with one
  void command(int side, uint32_t itt);
  void answer(int side, uint32_t itt);

  std::array<std::array<uint32_t, kCommandsKept>, 2> itts_{};
  std::array<size_t, 2> kept_{0, 0};
  std::array<int, 2> role_{-1, -1};  // 1: sent initiator PDUs, 0: target PDUs, -1: none yet
  int answered_ = 0, segments_ = 0, headers_ = 0, initiator_side_ = -1;
  Verdict verdict_ = Verdict::undecided;
};

}  // namespace iscsi_doctor::iscsi
