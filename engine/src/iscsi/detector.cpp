// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/detector.hpp"

#include <optional>

#include "iscsi/pdu.hpp"

namespace iscsi_doctor::iscsi {

namespace {
constexpr uint32_t kReservedTag = 0xffffffffu;

// A header at the start of `bytes` that passes the strict checks for the direction its opcode
// belongs to.
std::optional<Bhs> header_at(std::span<const uint8_t> bytes) {
  auto b = parse_bhs(bytes);
  if (!b || !is_known_opcode(b->opcode)) return std::nullopt;
  if (!plausible_bhs(*b, is_initiator_opcode(b->opcode))) return std::nullopt;
  return b;
}
}  // namespace

bool StreamDetector::starts_with_header(std::span<const uint8_t> bytes) { return header_at(bytes).has_value(); }

StreamDetector::Verdict StreamDetector::feed(int side, std::span<const uint8_t> payload) {
  if (verdict_ != Verdict::undecided || payload.empty()) return verdict_;
  if (!walk(side, payload) || ++segments_ > kSegmentsMax || (saw_header_ && ++headers_ > kHeadersMax)) {
    verdict_ = Verdict::not_iscsi;
    return verdict_;
  }
  if (answered_ >= kAnswersNeeded && role_[0] >= 0 && role_[1] >= 0 && role_[0] != role_[1]) {
    verdict_ = Verdict::iscsi;
    initiator_side_ = role_[0] == 1 ? 0 : 1;
  }
  return verdict_;
}

bool StreamDetector::walk(int side, std::span<const uint8_t> payload) {
  size_t off = 0;
  bool first = true;
  saw_header_ = false;
  while (off + kBhsLength <= payload.size()) {
    const auto b = header_at(payload.subspan(off));
    if (!b) return first;  // a segment of data need not start with a header; a chain must land on one
    saw_header_ = true;
    const int role = is_initiator_opcode(b->opcode) ? 1 : 0;
    if (role_[side] >= 0 && role_[side] != role) return false;  // one side speaks both parts
    role_[side] = role;
    if (b->itt != kReservedTag) {
      if (b->op() == Opcode::ScsiCommand) command(side, b->itt);
      if (b->op() == Opcode::ScsiResponse || b->op() == Opcode::DataIn || b->op() == Opcode::R2T) answer(side, b->itt);
    }
    // The next PDU: right after this one, after a header digest, or after both digests. One that
    // begins past this segment, or whose header this segment cuts, is not checked here.
    const size_t plain = off + b->pdu_length(false, false);
    size_t next = 0;
    for (const size_t at : {plain, plain + 4, plain + 8}) {
      if (at + kBhsLength > payload.size() || header_at(payload.subspan(at))) {
        next = at;
        break;
      }
    }
    if (!next) return false;  // the lengths lead into bytes that are no header
    off = next;
    first = false;
  }
  return true;
}

void StreamDetector::command(int side, uint32_t itt) {
  auto& kept = itts_[side];
  kept[kept_[side]++ % kCommandsKept] = itt;
}

void StreamDetector::answer(int side, uint32_t itt) {
  auto& kept = itts_[side ^ 1];
  const size_t n = kept_[side ^ 1] < kCommandsKept ? kept_[side ^ 1] : kCommandsKept;
  for (size_t i = 0; i < n; ++i)
    if (kept[i] == itt && itt != kReservedTag) {
      kept[i] = kReservedTag;  // each command counts once
      ++answered_;
      return;
    }
}

}  // namespace iscsi_doctor::iscsi
