// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/framer.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

#include "iscsi/crc32c.hpp"

namespace iscsi_doctor::iscsi {
namespace {

constexpr size_t kCarry = kBhsLength - 1;  // a window that may straddle chunks
constexpr size_t kProbe = kBhsLength + 4;  // enough to test a next BHS at +0 and +4

// First 4 bytes of a header this direction could send: opcode, reserved bits of byte 0, and the
// TotalAHSLength that only SCSI Command uses (RFC 7143 §11.2.1).
bool could_start_bhs(std::span<const uint8_t> b, bool from_initiator) {
  const uint8_t op = b[0] & 0x3f;
  if ((b[0] & 0x80) || !is_known_opcode(op) || is_initiator_opcode(op) != from_initiator) return false;
  if (!from_initiator && (b[0] & 0x40)) return false;
  return true;
}

}  // namespace

uint32_t kept_data_limit(const Bhs& b) {
  switch (b.op()) {
    case Opcode::LoginRequest:
    case Opcode::LoginResponse:
    case Opcode::TextRequest:
    case Opcode::TextResponse:
      return kKeepText;
    case Opcode::ScsiResponse:
    case Opcode::AsyncMessage:
    case Opcode::Reject:
      return kKeepSense;
    case Opcode::DataIn:
      return b.status_bit() ? kKeepSense : 0;
    default:
      return 0;
  }
}

Framer::Framer(bool from_initiator, FramerConfig config) : from_initiator_(from_initiator) {
  set_config(config);
  reset_pdu();
}

void Framer::set_config(const FramerConfig& c) {
  config_ = c;
  if (c.digests_known) {
    login_possible_ = false;  // digests are settled when login is over
    hd_ = c.header_digest ? Tri::on : Tri::off;
    dd_ = c.data_digest ? Tri::on : Tri::off;
  }
}

std::optional<bool> Framer::header_digest() const {
  if (hd_ == Tri::unknown) return std::nullopt;
  return hd_ == Tri::on;
}
std::optional<bool> Framer::data_digest() const {
  if (dd_ == Tri::unknown) return std::nullopt;
  return dd_ == Tri::on;
}

void Framer::start_unsynced() {
  login_possible_ = false;
  fresh_ = false;
  drop_held();
  reset_pdu();
  state_ = State::scan;
  candidate_ = false;
  carry_.clear();
  skipped_episode_ = 0;
}

void Framer::seed_digests(std::optional<bool> header, std::optional<bool> data) {
  if (header && hd_ == Tri::unknown) hd_ = *header ? Tri::on : Tri::off;
  if (data && dd_ == Tri::unknown) dd_ = *data ? Tri::on : Tri::off;
}

Position Framer::pos(uint64_t abs) const {
  Position p;
  p.stream_offset = abs;
  if (abs >= chunk_base_ && abs < chunk_end_) {
    p.in_this_chunk = true;
    p.chunk_offset = size_t(abs - chunk_base_);
  }
  return p;
}

void Framer::skipped(uint64_t n) {
  skipped_episode_ += n;
  stats_.bytes_skipped_unsynced += n;
}

void Framer::reset_pdu() {
  state_ = State::header;
  hdr_.clear();
  bhs_parsed_ = false;
  started_ = false;
  hdr_need_ = kBhsLength;
  tail_.clear();
  tail_lost_ = false;
  keep_.clear();
}

void Framer::push_back(std::span<const uint8_t> bytes, uint64_t abs) {
  // At most one rejection per step; run() replays these before the rest of the input.
  assert(pushback_.empty());
  pushback_.assign(bytes.begin(), bytes.end());
  pushback_abs_ = abs;
}

void Framer::feed(std::span<const uint8_t> chunk, FramerSink& sink) {
  chunk_base_ = next_abs_;
  chunk_end_ = next_abs_ + chunk.size();
  next_abs_ = chunk_end_;
  stats_.bytes_fed += chunk.size();
  run(chunk, chunk_base_, sink);
}

// Steps through `bytes` (at stream offset `abs`). Bytes a state rejects (a header that turned out
// implausible, probe bytes that belong to the next PDU) come back through pushback_ and are
// re-examined before the remaining input; each rejection returns fewer bytes than it consumed,
// so this terminates.
void Framer::run(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink) {
  std::vector<uint8_t> replay;
  uint64_t replay_abs = 0;
  size_t rpos = 0, i = 0;
  for (;;) {
    if (!pushback_.empty()) {
      std::vector<uint8_t> next;
      next.swap(pushback_);
      // The guard (rpos never exceeds replay.size()) spares GCC 14 a false -Wstringop-overflow.
      if (rpos < replay.size()) next.insert(next.end(), replay.begin() + ptrdiff_t(rpos), replay.end());
      replay.swap(next);
      replay_abs = pushback_abs_;
      rpos = 0;
    }
    if (rpos < replay.size()) {
      rpos += step(std::span<const uint8_t>(replay).subspan(rpos), replay_abs + rpos, sink);
      continue;
    }
    if (i >= bytes.size()) break;
    i += step(bytes.subspan(i), abs + i, sink);
  }
}

size_t Framer::step(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink) {
  switch (state_) {
    case State::scan:
      return step_scan(bytes, abs);
    case State::header:
      return step_header(bytes, abs, sink);
    case State::data:
      return step_data(bytes, abs, sink);
    case State::data_digest:
      return step_data_digest(bytes, abs, sink);
    case State::probe:
      return step_probe(bytes, abs, sink, false);
  }
  return bytes.size();
}

bool Framer::candidate_at(std::span<const uint8_t> w) const {
  const uint8_t b0 = w[0];
  if ((b0 & 0x80) || !is_known_opcode(b0 & 0x3f) || is_initiator_opcode(b0 & 0x3f) != from_initiator_)
    return false;
  // Login happens once, first (RFC 7143 §6.3): after Full Feature Phase PDUs, or in a stream
  // joined mid-way, a "Login" header is payload that happens to look like one.
  if (!login_possible_ && !pdu_carries_digests(b0 & 0x3f)) return false;
  const auto b = parse_bhs(w);
  return b && plausible_bhs(*b, from_initiator_, config_.max_data_segment, true);
}

size_t Framer::step_scan(std::span<const uint8_t> bytes, uint64_t abs) {
  auto enter_candidate = [&](uint64_t at) {
    reset_pdu();
    candidate_ = true;
    pdu_abs_ = at;
    at_chunk_start_ = at == chunk_base_ && at < chunk_end_;
  };
  if (!carry_.empty()) {
    // Windows that start in the carry and end in this input.
    std::array<uint8_t, 2 * kCarry> win{};
    const size_t take = std::min(bytes.size(), kCarry);
    std::copy(carry_.begin(), carry_.end(), win.begin());
    std::copy(bytes.begin(), bytes.begin() + ptrdiff_t(take), win.begin() + ptrdiff_t(carry_.size()));
    const size_t total = carry_.size() + take;
    for (size_t p = 0; p < carry_.size() && p + kBhsLength <= total; ++p) {
      if (candidate_at(std::span<const uint8_t>(win).subspan(p, kBhsLength))) {
        skipped(p);
        const std::vector<uint8_t> head(carry_.begin() + ptrdiff_t(p), carry_.end());
        const uint64_t at = carry_abs_ + p;
        carry_.clear();
        enter_candidate(at);
        hdr_ = head;
        return 0;
      }
    }
    if (carry_.size() - 1 + kBhsLength <= total) {  // every carry window tested
      skipped(carry_.size());
      carry_.clear();
      return 0;
    }
    // Too little input to test them all: absorb it and keep the last 47 bytes.
    carry_.insert(carry_.end(), bytes.begin(), bytes.end());
    if (carry_.size() > kCarry) {
      const size_t drop = carry_.size() - kCarry;
      skipped(drop);
      carry_.erase(carry_.begin(), carry_.begin() + ptrdiff_t(drop));
      carry_abs_ += drop;
    }
    return bytes.size();
  }
  const size_t n = bytes.size();
  for (size_t p = 0; p + kBhsLength <= n; ++p) {
    if (candidate_at(bytes.subspan(p, kBhsLength))) {
      skipped(p);
      enter_candidate(abs + p);
      return p;
    }
  }
  const size_t keep = std::min(n, kCarry);
  skipped(n - keep);
  carry_.assign(bytes.end() - ptrdiff_t(keep), bytes.end());
  carry_abs_ = abs + (n - keep);
  return n;
}

size_t Framer::step_header(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink) {
  if (hdr_.empty()) {
    pdu_abs_ = abs;
    if (!candidate_) at_chunk_start_ = abs == chunk_base_ && abs < chunk_end_;
  }
  const size_t take = std::min<size_t>(bytes.size(), hdr_need_ - hdr_.size());
  hdr_.insert(hdr_.end(), bytes.begin(), bytes.begin() + ptrdiff_t(take));
  if (hdr_.size() < hdr_need_) return take;
  if (!bhs_parsed_) {
    bhs_ = *parse_bhs(hdr_);  // hdr_ holds 48 bytes here
    bhs_parsed_ = true;
    // A stream's first header, and the one after a PDU found by searching, pass the strict checks.
    const bool fresh = std::exchange(fresh_, false), after_scan = std::exchange(strict_next_, false);
    const bool strict = candidate_ || fresh || after_scan;
    if (!plausible_bhs(bhs_, from_initiator_, config_.max_data_segment, strict)) {
      if (candidate_) {
        reject_candidate();
      } else {
        const uint64_t at = pdu_abs_;
        std::vector<uint8_t> rest(hdr_.begin() + 1, hdr_.end());
        const char* why = implausible_reason(bhs_, from_initiator_, config_.max_data_segment, strict);
        reset_pdu();
        lose_sync(sink, why, at);
        skipped(1);
        push_back(rest, at + 1);
      }
      return take;
    }
    if (unconfirmed_ && !candidate_) confirm(sink);  // the held PDU chains with this one
    // Header digest: on, or unknown → collect 4 more bytes to test (§11.2, §13.1).
    hd_this_ = pdu_carries_digests(bhs_.opcode) && hd_ != Tri::off;
    hdr_need_ = bhs_.header_length(hd_this_);
    if (hdr_.size() < hdr_need_) return take;
  }
  header_complete(sink);
  return take;
}

void Framer::reject_candidate() {
  const uint64_t at = pdu_abs_ + 1;
  std::vector<uint8_t> rest(hdr_.begin() + 1, hdr_.end());
  reset_pdu();
  candidate_ = false;
  state_ = State::scan;
  skipped(1);
  push_back(rest, at);
}

void Framer::header_complete(FramerSink& sink) {
  const uint32_t hlen = bhs_.header_length(false);
  hd_check_ = DigestCheck::absent;
  if (hd_this_) {
    const auto h = std::span<const uint8_t>(hdr_);
    const bool match = crc32c_of(h.first(hlen)) == digest_from_wire(h.subspan(hlen, 4));
    if (hd_ == Tri::on) {
      if (!match && candidate_) {
        reject_candidate();
        return;
      }
      hd_check_ = match ? DigestCheck::ok : DigestCheck::bad;
      if (!match) ++stats_.header_digest_errors;
    } else if (match) {  // detection: a CRC match by chance is a 2^-32 event
      hd_ = Tri::on;
      hd_check_ = DigestCheck::ok;
    } else {
      // No digest; the 4 bytes belong to what follows. A resync candidate does not commit the
      // setting, as it may be a false find.
      if (!candidate_) hd_ = Tri::off;
      hd_this_ = false;
      push_back(h.subspan(hlen, 4), pdu_abs_ + hlen);
      hdr_.resize(hlen);
    }
  }
  if (candidate_) {
    candidate_ = false;
    strict_next_ = true;
    // Senders begin PDUs at a segment's start: a command found inside one is held until it chains.
    unconfirmed_ = !at_chunk_start_ && bhs_.op() == Opcode::ScsiCommand;
    held_.clear();
    ++stats_.resyncs;
    sink.on_resync(Resync{pos(pdu_abs_), skipped_episode_});
    skipped_episode_ = 0;
  }
  started_ = true;
  if (pdu_carries_digests(bhs_.opcode)) login_possible_ = false;
  emit_start(sink, PduStart{bhs_, pos(pdu_abs_), hd_check_});
  begin_data(sink);
}

void Framer::begin_data(FramerSink& sink) {
  const uint32_t dl = bhs_.data_length;
  data_left_ = dl;
  pad_left_ = pad4(dl) - dl;
  crc_ = crc32c_init();
  crc_valid_ = true;
  data_incomplete_ = false;
  keep_.clear();
  keep_limit_ = std::min(kept_data_limit(bhs_), dl);
  tail_.clear();
  tail_lost_ = false;
  const bool digests = pdu_carries_digests(bhs_.opcode) && dl > 0;
  dd_this_ = digests && dd_ == Tri::on;
  dd_probe_ = digests && dd_ == Tri::unknown;
  dd_check_ = DigestCheck::absent;
  if (dl == 0) {
    end_pdu(sink, pdu_abs_ + hdr_.size() - 1, false);
  } else {
    state_ = State::data;
  }
}

size_t Framer::step_data(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink) {
  const size_t take = size_t(std::min<uint64_t>(bytes.size(), data_left_ + pad_left_));
  const size_t d = size_t(std::min<uint64_t>(take, data_left_));
  if (keep_.size() < keep_limit_) {
    const size_t k = std::min<size_t>(d, keep_limit_ - keep_.size());
    keep_.insert(keep_.end(), bytes.begin(), bytes.begin() + ptrdiff_t(k));
  }
  if ((dd_this_ || dd_probe_) && crc_valid_) crc_ = crc32c(crc_, bytes.first(take));  // data + padding
  data_left_ -= d;
  pad_left_ -= take - d;
  if (data_left_ + pad_left_ == 0) {
    if (dd_this_ || dd_probe_) {
      state_ = dd_this_ ? State::data_digest : State::probe;
      tail_.clear();
      tail_abs_ = abs + take;
    } else {
      end_pdu(sink, abs + take - 1, false);
    }
  }
  return take;
}

size_t Framer::step_data_digest(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink) {
  const size_t take = std::min<size_t>(bytes.size(), 4 - tail_.size());
  tail_.insert(tail_.end(), bytes.begin(), bytes.begin() + ptrdiff_t(take));
  if (tail_.size() < 4) return take;
  if (!crc_valid_ || tail_lost_) {
    dd_check_ = DigestCheck::unchecked;
  } else if (digest_from_wire(tail_) == crc32c_final(crc_)) {
    dd_check_ = DigestCheck::ok;
  } else {
    dd_check_ = DigestCheck::bad;
    ++stats_.data_digest_errors;
  }
  end_pdu(sink, abs + take - 1, false);
  return take;
}

// Data digest presence undecided: look at the bytes after the padded data segment.
size_t Framer::step_probe(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink, bool force) {
  (void)abs;
  const size_t take = std::min<size_t>(bytes.size(), kProbe - tail_.size());
  tail_.insert(tail_.end(), bytes.begin(), bytes.begin() + ptrdiff_t(take));
  const auto t = std::span<const uint8_t>(tail_);
  auto plausible_at = [&](size_t at) {
    if (t.size() < at + kBhsLength) return false;
    const auto b = parse_bhs(t.subspan(at, kBhsLength));
    return b && plausible_bhs(*b, from_initiator_, config_.max_data_segment, true);
  };
  const bool crc_match = crc_valid_ && t.size() >= 4 && digest_from_wire(t) == crc32c_final(crc_);
  // Without a CRC match, a plausible BHS right after the data settles it (no digest). When the
  // CRC was computable and did not match, 4 bytes that can start a BHS already say so: waiting
  // for 48 would delay this PDU's end until the peer's next PDU.
  const bool at0 = !crc_match && (plausible_at(0) || (crc_valid_ && t.size() >= 4 && t.size() < kBhsLength &&
                                                      could_start_bhs(t, from_initiator_)));
  if (!crc_match && !at0 && t.size() < kProbe && !force) return take;

  bool on = crc_match, commit = true;
  if (!on) {
    const bool at4 = plausible_at(4);
    on = at4 && !at0;
    commit = at0 != at4;  // neither (or both): assume none for this PDU, keep detecting
  }
  if (commit) dd_ = on ? Tri::on : Tri::off;
  const std::vector<uint8_t> probe(tail_.begin(), tail_.end());
  const uint64_t probe_abs = tail_abs_;
  if (on && probe.size() >= 4) {
    dd_check_ = crc_match ? DigestCheck::ok : crc_valid_ ? DigestCheck::bad : DigestCheck::unchecked;
    if (dd_check_ == DigestCheck::bad) ++stats_.data_digest_errors;
    end_pdu(sink, probe_abs + 3, false);
    if (probe.size() > 4) push_back(std::span<const uint8_t>(probe).subspan(4), probe_abs + 4);
  } else {
    dd_check_ = DigestCheck::absent;
    end_pdu(sink, probe_abs - 1, false);
    if (!probe.empty()) push_back(probe, probe_abs);
  }
  return take;
}

void Framer::end_pdu(FramerSink& sink, uint64_t last_abs, bool truncated) {
  ++stats_.pdus;
  if (data_incomplete_) ++stats_.data_incomplete_pdus;
  const bool kept_truncated = keep_.size() < bhs_.data_length;
  emit_end(sink, PduEnd{bhs_, keep_, kept_truncated, pos(pdu_abs_), pos(last_abs), hd_check_, dd_check_,
                        data_incomplete_, truncated});
  // Ended at a chunk's end: where senders end PDUs, not chance.
  if (unconfirmed_ && !truncated && (last_abs + 1 == chunk_end_ || last_abs + 1 == chunk_base_))
    confirm(sink);
  reset_pdu();
}

void Framer::emit_start(FramerSink& sink, const PduStart& s) {
  if (!unconfirmed_) {
    sink.on_pdu_start(s);
    return;
  }
  Held& h = held_.emplace_back();
  h.bhs = s.bhs;
  h.first_abs = s.first_byte.stream_offset;
  h.header_digest = s.header_digest;
}

void Framer::emit_end(FramerSink& sink, const PduEnd& e) {
  if (!unconfirmed_) {
    sink.on_pdu_end(e);
    return;
  }
  Held& h = held_.emplace_back();
  h.end = true;
  h.bhs = e.bhs;
  h.first_abs = e.first_byte.stream_offset;
  h.last_abs = e.last_byte.stream_offset;
  h.header_digest = e.header_digest;
  h.data_digest = e.data_digest;
  h.kept.assign(e.kept_data.begin(), e.kept_data.end());
  h.kept_truncated = e.kept_truncated;
  h.data_incomplete = e.data_incomplete;
  h.truncated = e.truncated;
}

void Framer::confirm(FramerSink& sink) {
  unconfirmed_ = false;
  const std::vector<Held> held = std::exchange(held_, {});
  for (const Held& h : held) {
    if (h.end)
      sink.on_pdu_end(PduEnd{h.bhs, h.kept, h.kept_truncated, pos(h.first_abs), pos(h.last_abs),
                             h.header_digest, h.data_digest, h.data_incomplete, h.truncated});
    else
      sink.on_pdu_start(PduStart{h.bhs, pos(h.first_abs), h.header_digest});
  }
}

void Framer::drop_held() {
  unconfirmed_ = strict_next_ = false;
  held_.clear();
}

void Framer::lose_sync(FramerSink& sink, const char* why, uint64_t at_abs) {
  ++stats_.sync_losses;
  drop_held();  // it did not chain
  reset_pdu();
  state_ = State::scan;
  candidate_ = false;
  carry_.clear();
  skipped_episode_ = 0;
  sink.on_sync_lost(SyncLost{why, pos(at_abs)});
}

void Framer::gap(uint64_t lost, FramerSink& sink) {
  if (lost == 0) return;
  stats_.bytes_lost += lost;
  chunk_base_ = chunk_end_ = next_abs_;  // no byte of a chunk is current any more
  uint64_t at = next_abs_;
  next_abs_ += lost;
  uint64_t left = lost;

  for (;;) {
    if (unconfirmed_ && !held_.empty() && held_.back().end) confirm(sink);  // its chain is lost
    switch (state_) {
      case State::scan:
        skipped(carry_.size());
        carry_.clear();
        return;
      case State::probe:
        // Decide with what was seen, then replay the probe bytes (they precede the gap).
        step_probe({}, at, sink, true);
        run({}, at, sink);
        continue;
      case State::header:
        if (candidate_) {  // a half-seen resync candidate is abandoned; keep scanning
          skipped(hdr_.size());
          reset_pdu();
          candidate_ = false;
          state_ = State::scan;
          continue;
        }
        lose_sync(sink, hdr_.empty() ? "bytes lost at a PDU boundary" : "bytes lost inside a PDU header", at);
        continue;
      case State::data: {
        const uint64_t in = std::min(left, data_left_ + pad_left_);
        const uint64_t d = std::min(in, data_left_);
        if (d) {
          data_incomplete_ = true;
          keep_limit_ = uint32_t(keep_.size());  // kept data stays a contiguous prefix
        }
        crc_valid_ = false;
        data_left_ -= d;
        pad_left_ -= in - d;
        left -= in;
        at += in;
        if (data_left_ + pad_left_ > 0) return;  // the gap ended inside the data segment
        if (dd_this_) {
          state_ = State::data_digest;
          tail_.clear();
          tail_abs_ = at;
          continue;
        }
        if (dd_probe_) {
          if (left == 0) {  // the next bytes decide (by plausibility: no CRC now)
            state_ = State::probe;
            tail_.clear();
            tail_abs_ = at;
            return;
          }
          dd_check_ = DigestCheck::unchecked;
          end_pdu(sink, at - 1, false);
          lose_sync(sink, "bytes lost past a PDU whose data digest is undetected", at);
          continue;
        }
        end_pdu(sink, at - 1, false);
        if (left == 0) return;  // the gap ended exactly on a PDU boundary
        lose_sync(sink, "bytes lost across a PDU boundary", at);
        continue;
      }
      case State::data_digest: {
        const uint64_t in = std::min<uint64_t>(left, 4 - tail_.size());
        tail_.resize(tail_.size() + size_t(in), 0);
        tail_lost_ = true;
        left -= in;
        at += in;
        if (tail_.size() < 4) return;
        dd_check_ = DigestCheck::unchecked;
        end_pdu(sink, at - 1, false);
        if (left == 0) return;
        lose_sync(sink, "bytes lost across a PDU boundary", at);
        continue;
      }
    }
  }
}

void Framer::finish(FramerSink& sink) {
  chunk_base_ = chunk_end_ = next_abs_;
  if (state_ == State::probe) {
    step_probe({}, next_abs_, sink, true);
    run({}, next_abs_, sink);
  }
  if (started_) {
    if (dd_this_ || dd_probe_) dd_check_ = DigestCheck::unchecked;
    end_pdu(sink, next_abs_ == 0 ? 0 : next_abs_ - 1, true);
  }
  if (state_ == State::scan) {
    skipped(carry_.size());
    carry_.clear();
  } else {
    reset_pdu();
  }
  drop_held();  // never chained
}

}  // namespace iscsi_doctor::iscsi
