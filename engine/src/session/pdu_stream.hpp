// SPDX-License-Identifier: GPL-2.0-or-later
// One direction's PDU framer, with its events collected per TCP segment and each PDU's first
// byte mapped back to the segment (frame, time) that carried it.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "iscsi/framer.hpp"
#include "util/fifo.hpp"

namespace iscsi_doctor::session {

struct PduEvent {
  enum class Type : uint8_t { start, end } type = Type::start;
  iscsi::Bhs bhs;
  bool began_in_chunk = false;  // the PDU's first byte is in the segment being fed
  uint64_t first_frame = 0;     // segment that carried the first byte (0 if lost)
  int64_t first_t = 0;
  uint64_t last_frame = 0;  // end: segment that carried the last byte (0 if lost)
  int64_t last_t = 0;
  std::vector<uint8_t> data;  // end: kept data (login/text keys, sense)
  bool data_incomplete = false, truncated = false, kept_truncated = false;
  bool header_digest_bad = false, data_digest_bad = false;
};

class PduStream : private iscsi::FramerSink {
public:
  explicit PduStream(bool from_initiator) : framer_(from_initiator) {}

  // Feeds one segment's new bytes; the events are valid until the next call.
  std::vector<PduEvent>& feed(std::span<const uint8_t> bytes, uint64_t frame, int64_t t);
  // Bytes the capture lacks, inside a segment's feed (snaplen): its events join the segment's.
  void gap(uint64_t lost_bytes);
  // Bytes lost between segments: the events this gap ends (a PDU whose last bytes were lost).
  std::vector<PduEvent>& lose(uint64_t lost_bytes) {
    events_.clear();
    gap(lost_bytes);
    return events_;
  }
  void finish();
  void start_unsynced() { framer_.start_unsynced(); }
  // max_data_segment: a longer DataSegmentLength is taken as lost framing (then resync).
  void set_digests(bool header, bool data, uint32_t max_data_segment = iscsi::kMaxDataSegmentLength);

  bool mid_pdu() const { return open_; }  // inside a PDU whose header has been seen
  std::vector<PduEvent>& events() { return events_; }
  std::vector<std::string> take_messages() { return std::exchange(messages_, {}); }

  size_t memory_bytes() const {  // heap bytes held (the memory budget)
    size_t n = framer_.memory_bytes() + events_.capacity() * sizeof(PduEvent) + recent_.capacity() * sizeof(Chunk);
    for (const PduEvent& e : events_) n += e.data.capacity();
    return n;
  }
  uint64_t pdus() const { return framer_.stats().pdus; }
  uint64_t resyncs() const { return framer_.stats().resyncs; }
  bool header_digest_on() const { return framer_.header_digest().value_or(false); }
  bool data_digest_on() const { return framer_.data_digest().value_or(false); }
  std::optional<bool> header_digest() const { return framer_.header_digest(); }
  std::optional<bool> data_digest() const { return framer_.data_digest(); }
  void seed_digests(std::optional<bool> header, std::optional<bool> data) {
    framer_.seed_digests(header, data);
  }

private:
  void on_pdu_start(const iscsi::PduStart&) override;
  void on_pdu_end(const iscsi::PduEnd&) override;
  void on_sync_lost(const iscsi::SyncLost&) override;
  void on_resync(const iscsi::Resync&) override;
  // The segment (frame, time) that carried a stream position; {0, 0} when it was lost.
  std::pair<uint64_t, int64_t> locate(const iscsi::Position& p) const;

  iscsi::Framer framer_;
  std::vector<PduEvent> events_;
  std::vector<std::string> messages_;
  bool open_ = false;
  struct Chunk {
    uint64_t abs = 0;
    uint64_t frame = 0;
    int64_t t = 0;
  };
  util::Fifo<Chunk> recent_;  // where recent chunks began in the stream
  uint64_t abs_ = 0;
  uint64_t cur_frame_ = 0;
  int64_t cur_t_ = 0;
};

}  // namespace iscsi_doctor::session
