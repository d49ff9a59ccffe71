// SPDX-License-Identifier: GPL-2.0-or-later
// Streaming iSCSI PDU framing over one TCP direction (RFC 7143 §11.2: BHS, AHS, header digest,
// padded data segment, data digest).
//
// The caller feeds each direction's in-order bytes chunk by chunk and reports lost bytes with
// gap(). The framer buffers only the header (BHS + AHS + header digest, at most 1072 bytes) and,
// for a few PDU types, the first bytes of the data segment (see kept_data_limit); all other data
// is counted and skipped, so memory stays small however large the PDUs are.
//
// Positions: every event carries a Position — the byte's offset inside the chunk being fed when
// it lies in that chunk, plus its absolute offset in the direction's stream (counting fed and
// lost bytes from the first feed) so callers can map it to an earlier TCP segment otherwise.
//
// Malformed input never reads out of bounds or throws:
//  - an implausible header while in sync → on_sync_lost, then scanning (see below);
//  - a gap inside a PDU's data segment/padding/data digest → the PDU completes with
//    data_incomplete (and its data digest unchecked); a gap touching a header, or one running
//    past the end of the current PDU → the PDU (if started) completes, then on_sync_lost;
//  - while unsynced (after start_unsynced() or sync loss) the framer scans byte by byte for a
//    48-byte window that passes plausible_bhs(strict) (keeping a 47-byte carry across chunks);
//    when the header digest is known to be on, the candidate must also carry a good digest.
//    Login PDUs are not accepted as resync points once Full Feature Phase PDUs were seen, the
//    digests were configured, or the stream was joined mid-way (start_unsynced).
//    A candidate that fails late is dropped and scanning resumes one byte after its start;
//  - digest mismatches are reported (PduStart/PduEnd, stats) and framing continues.
// Unconfirmed framing (docs/rules.md "Ports": random bytes give no commands): a SCSI Command
// found by scanning that does not begin at a chunk's first byte is held (its events delayed) until
// it chains: the next header stands where its lengths put it and passes the strict checks, the
// PDU ends at a chunk's end, or a gap follows its end (nothing left to check). The header after any
// PDU found by scanning, and a stream's first header, must pass the strict checks, else sync is
// lost; a held PDU is then dropped, as at finish().
// Every on_pdu_start is followed by exactly one on_pdu_end (possibly flagged truncated by
// finish()). Digests: Login PDUs never carry them (RFC 7143 §13.1). When !digests_known the
// framer detects them: header digest on iff the 4 bytes after the first non-Login header equal
// its CRC32C; data digest on iff the 4 bytes after the first padded data segment equal its
// CRC32C or, if the data could not be checksummed (gap) or mismatched, by which of offset 0/+4
// starts a plausible next BHS. A detected setting stays until set_config().
// Because of that lookahead, and because a PDU's last bytes may be lost in a gap, an event's
// position can lie in an earlier chunk (in_this_chunk false): map stream_offset to the TCP
// segment that carried it, for last_byte as for first_byte.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "iscsi/pdu.hpp"

namespace iscsi_doctor::iscsi {

struct FramerConfig {
  bool header_digest = false, data_digest = false;
  bool digests_known = false;                         // true once login keys settled them; else auto-detect
  uint32_t max_data_segment = kMaxDataSegmentLength;  // larger DataSegmentLength → implausible
};

struct Position {
  size_t chunk_offset = 0;     // offset in the current chunk (0 when !in_this_chunk)
  bool in_this_chunk = false;  // false: the byte came in an earlier chunk, or was lost in a gap
  uint64_t stream_offset = 0;  // absolute offset in this direction's stream
};

enum class DigestCheck : uint8_t {
  absent,  // not negotiated/detected, Login PDU, or empty data segment
  ok,
  bad,        // present and wrong
  unchecked,  // present but not verifiable (bytes lost, or PDU truncated)
};

struct PduStart {
  const Bhs& bhs;
  Position first_byte;
  DigestCheck header_digest;
};

struct PduEnd {
  const Bhs& bhs;
  std::span<const uint8_t>
      kept_data;        // first bytes of the data segment (see kept_data_limit); valid during the call
  bool kept_truncated;  // data segment longer than what was kept (or bytes lost)
  Position first_byte, last_byte;  // last_byte: last byte incl. padding and digests
  DigestCheck header_digest, data_digest;
  bool data_incomplete;  // some data-segment bytes were lost in a gap
  bool truncated;        // the PDU did not end: finish() was called, or sync was lost inside it
};

struct SyncLost {
  const char* why;
  Position at;  // first byte that could not be framed
};

struct Resync {
  Position first_byte;     // first byte of the PDU found again
  uint64_t bytes_skipped;  // fed bytes discarded while unsynced (this episode)
};

class FramerSink {
public:
  virtual ~FramerSink() = default;
  virtual void on_pdu_start(const PduStart&) = 0;  // header (+AHS, header digest) complete
  virtual void on_pdu_end(const PduEnd&) = 0;      // last byte consumed (or lost, or truncated)
  virtual void on_sync_lost(const SyncLost&) = 0;  // garbage or lost header: scanning follows
  virtual void on_resync(const Resync&) = 0;       // a plausible BHS found again; on_pdu_start follows
};

struct FramerStats {
  uint64_t pdus = 0;  // completed (on_pdu_end), including truncated
  uint64_t bytes_fed = 0, bytes_lost = 0;
  uint64_t bytes_skipped_unsynced = 0;  // fed bytes discarded while scanning
  uint64_t sync_losses = 0, resyncs = 0;
  uint64_t header_digest_errors = 0, data_digest_errors = 0;
  uint64_t data_incomplete_pdus = 0;
};

// How many data-segment bytes the framer keeps for a PDU: Login/Text text (key negotiation),
// SCSI Response / Data-In with S / Async Message / Reject (sense data or rejected header).
inline constexpr uint32_t kKeepText = 65536, kKeepSense = 256;
uint32_t kept_data_limit(const Bhs& bhs);

class Framer {
public:
  explicit Framer(bool from_initiator, FramerConfig config = {});

  // Applies from the next PDU header on (a PDU in progress keeps its digest layout).
  void set_config(const FramerConfig& config);
  const FramerConfig& config() const { return config_; }

  void feed(std::span<const uint8_t> chunk, FramerSink& sink);
  void gap(uint64_t lost_bytes, FramerSink& sink);
  // The capture starts mid-stream: scan for a plausible BHS before framing. Call before feeding.
  void start_unsynced();
  // End of stream: completes a pending digest probe and reports a PDU in progress as truncated.
  void finish(FramerSink& sink);

  bool in_sync() const { return state_ != State::scan && !candidate_; }
  // Digest settings in use (configured or detected); nullopt while still undetected.
  std::optional<bool> header_digest() const;
  std::optional<bool> data_digest() const;
  // What an earlier look at the same stream detected (a joined connection: see Analyzer), taken
  // as detected here; a setting already known stays.
  void seed_digests(std::optional<bool> header, std::optional<bool> data);
  const FramerStats& stats() const { return stats_; }
  size_t memory_bytes() const {  // heap bytes held (the memory budget)
    size_t n = carry_.capacity() + hdr_.capacity() + keep_.capacity() + tail_.capacity() + pushback_.capacity() +
               held_.capacity() * sizeof(Held);
    for (const Held& h : held_) n += h.kept.capacity();
    return n;
  }

private:
  enum class State : uint8_t { scan, header, data, data_digest, probe };
  enum class Tri : uint8_t { unknown, off, on };

  size_t step(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink);
  void run(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink);
  size_t step_scan(std::span<const uint8_t> bytes, uint64_t abs);
  size_t step_header(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink);
  size_t step_data(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink);
  size_t step_data_digest(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink);
  size_t step_probe(std::span<const uint8_t> bytes, uint64_t abs, FramerSink& sink, bool force);

  bool candidate_at(std::span<const uint8_t> window) const;
  void header_complete(FramerSink& sink);
  void begin_data(FramerSink& sink);
  void end_pdu(FramerSink& sink, uint64_t last_abs, bool truncated);
  void lose_sync(FramerSink& sink, const char* why, uint64_t at_abs);
  void reject_candidate();  // drop a resync candidate, rescan from its second byte
  void push_back(std::span<const uint8_t> bytes, uint64_t abs);
  Position pos(uint64_t abs) const;
  void skipped(uint64_t n);
  void reset_pdu();
  // Unconfirmed framing: events held until the PDU chains (see above).
  void emit_start(FramerSink& sink, const PduStart& s);
  void emit_end(FramerSink& sink, const PduEnd& e);
  void confirm(FramerSink& sink);
  void drop_held();

  bool from_initiator_;
  FramerConfig config_;
  Tri hd_ = Tri::unknown, dd_ = Tri::unknown;
  State state_ = State::header;
  bool candidate_ = false;      // current header was found by scanning and is not yet confirmed
  bool login_possible_ = true;  // no Full Feature Phase PDU seen, digests not settled, not joined mid-way
  uint64_t skipped_episode_ = 0;

  // Stream positions: chunk_base_ is the absolute offset of the current chunk's first byte.
  uint64_t chunk_base_ = 0, chunk_end_ = 0, next_abs_ = 0;

  // scan
  std::vector<uint8_t> carry_;
  uint64_t carry_abs_ = 0;

  // current PDU
  std::vector<uint8_t> hdr_;  // BHS + AHS + header digest (+ digest probe bytes)
  uint64_t pdu_abs_ = 0;      // absolute offset of the PDU's first byte
  Bhs bhs_{};
  bool bhs_parsed_ = false;
  bool started_ = false;   // on_pdu_start delivered
  uint32_t hdr_need_ = 0;  // header bytes to collect (BHS+AHS+digest or probe)
  bool hd_this_ = false;   // this PDU has a header digest
  bool dd_this_ = false;   // this PDU has a data digest (known)
  bool dd_probe_ = false;  // data digest presence undecided for this PDU
  DigestCheck hd_check_ = DigestCheck::absent, dd_check_ = DigestCheck::absent;
  uint64_t data_left_ = 0, pad_left_ = 0;  // data-segment and padding bytes still to come
  uint32_t crc_ = 0;
  bool crc_valid_ = true;  // all data+padding bytes were fed (not lost)
  bool data_incomplete_ = false;
  std::vector<uint8_t> keep_;
  uint32_t keep_limit_ = 0;
  std::vector<uint8_t> tail_;  // data digest bytes, or probe bytes after the data
  uint64_t tail_abs_ = 0;      // absolute offset of tail_[0]
  bool tail_lost_ = false;     // some data digest bytes fell into a gap

  // bytes rejected by a state that must be re-examined before the rest of the input
  std::vector<uint8_t> pushback_;
  uint64_t pushback_abs_ = 0;

  // held events of an unconfirmed PDU
  struct Held {
    bool end = false;
    Bhs bhs{};
    uint64_t first_abs = 0, last_abs = 0;
    DigestCheck header_digest = DigestCheck::absent, data_digest = DigestCheck::absent;
    std::vector<uint8_t> kept;
    bool kept_truncated = false, data_incomplete = false, truncated = false;
  };
  bool unconfirmed_ = false;  // the current PDU's events are held
  bool strict_next_ = false;  // the header after a PDU found by scanning passes the strict checks
  bool fresh_ = true;         // no header parsed yet in this stream
  bool at_chunk_start_ = false;  // the current PDU began at a chunk's first byte
  std::vector<Held> held_;

  FramerStats stats_;
};

}  // namespace iscsi_doctor::iscsi
