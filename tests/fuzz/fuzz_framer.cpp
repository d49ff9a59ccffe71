// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes the streaming framer: the input is cut into chunks (and gaps) at points derived from
// its first bytes and fed in both directions; the sink checks the event invariants.
// Byte 0 selects the mode: bit 0 digests known, bit 1 header digest, bit 2 data digest,
// bit 3 start unsynced, bit 4 small DataSegmentLength limit, bit 5 structured (the rest
// describes PDUs that are encoded, then mutated by the remaining bytes).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "iscsi/framer.hpp"
#include "iscsi/login_keys.hpp"
#include "iscsi/pdu_builder.hpp"

using namespace iscsi_doctor::iscsi;

namespace {

[[noreturn]] void fail() { __builtin_trap(); }

struct CheckingSink : FramerSink {
  Negotiation negotiation;
  size_t chunk_size = 0;
  bool open = false;
  uint64_t last_end = 0;
  bool any_end = false;
  void check(const Position& p) {
    if (p.in_this_chunk && p.chunk_offset >= chunk_size) fail();
    if (!p.in_this_chunk && p.chunk_offset != 0) fail();
  }
  void on_pdu_start(const PduStart& s) override {
    if (open) fail();  // every start is followed by its end first
    check(s.first_byte);
    open = true;
  }
  void on_pdu_end(const PduEnd& e) override {
    if (!open) fail();
    open = false;
    check(e.first_byte);
    check(e.last_byte);
    if (e.last_byte.stream_offset < e.first_byte.stream_offset) fail();
    if (any_end && e.first_byte.stream_offset <= last_end) fail();  // PDUs never overlap
    last_end = e.last_byte.stream_offset;
    any_end = true;
    if (e.kept_data.size() > kept_data_limit(e.bhs) || e.kept_data.size() > e.bhs.data_length) fail();
    negotiation.add_pdu(e.bhs, e.kept_data, e.kept_truncated);
  }
  void on_sync_lost(const SyncLost& l) override {
    if (open || !l.why) fail();
    check(l.at);
  }
  void on_resync(const Resync& r) override {
    if (open) fail();
    check(r.first_byte);
  }
};

struct Rng {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  }
};

// Structured mode: 4 bytes per PDU → a valid PDU of a chosen opcode and data length.
std::vector<uint8_t> build_stream(const uint8_t* d, size_t n, bool initiator, bool hd, bool dd) {
  static constexpr uint8_t kIni[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10};
  static constexpr uint8_t kTgt[] = {0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3f};
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 4 <= n && out.size() < (1u << 16); i += 4) {  // small streams keep exec/s up
    Bhs b;
    b.opcode = initiator ? kIni[d[i] % sizeof kIni] : kTgt[d[i] % sizeof kTgt];
    b.flags = d[i + 1];
    b.itt = d[i + 3];
    std::vector<uint8_t> data(size_t(d[i + 2]) * (d[i + 3] & 0x0f));
    for (size_t k = 0; k < data.size(); ++k)
      data[k] = uint8_t(k ^ d[i]);
    const auto pdu = encode_pdu(b, data, hd, dd);
    out.insert(out.end(), pdu.begin(), pdu.end());
  }
  return out;
}

void run(const uint8_t* data, size_t size, bool initiator) {
  if (size < 9) return;
  const uint8_t mode = data[0];
  Rng rng{0};
  for (int i = 1; i < 9; ++i)
    rng.s = (rng.s << 8) | data[i];
  FramerConfig cfg;
  cfg.digests_known = mode & 1;
  cfg.header_digest = mode & 2;
  cfg.data_digest = mode & 4;
  if (mode & 16) cfg.max_data_segment = 8192;

  std::vector<uint8_t> stream;
  if (mode & 32) {
    const size_t half = (size - 9) / 2;
    stream = build_stream(data + 9, half, initiator, cfg.header_digest, cfg.data_digest);
    // Mutate: the second half XORs bytes at positions it chooses.
    for (size_t i = 9 + half; i + 2 < size && !stream.empty(); i += 3)
      stream[((size_t(data[i]) << 8) | data[i + 1]) % stream.size()] ^= data[i + 2];
  } else {
    stream.assign(data + 9, data + size);
  }

  Framer framer(initiator, cfg);
  CheckingSink sink;
  if (mode & 8) framer.start_unsynced();
  size_t at = 0;
  while (at < stream.size()) {
    const uint32_t r = rng.next();
    if ((r & 0x1f) == 0) {  // occasionally a gap: small, PDU-sized, or huge
      const uint64_t lost = (r >> 8) % 3 == 0   ? (r >> 12) % 64
                            : (r >> 8) % 3 == 1 ? (r >> 12) % 70000
                                                : (1ull << 40);
      sink.chunk_size = 0;
      framer.gap(lost, sink);
      continue;
    }
    const size_t n = std::min<size_t>(stream.size() - at, 1 + (r >> 8) % ((r & 0x20) ? 7 : 1500));
    sink.chunk_size = n;
    framer.feed(std::span<const uint8_t>(stream).subspan(at, n), sink);
    at += n;
    if ((r & 0x3c0) == 0x3c0)
      framer.set_config(FramerConfig{bool(r & 1), bool(r & 2), true, cfg.max_data_segment});
  }
  sink.chunk_size = 0;
  framer.finish(sink);
  if (sink.open) fail();
  const auto& st = framer.stats();
  if (st.bytes_fed != stream.size()) fail();
  if (st.bytes_skipped_unsynced > st.bytes_fed) fail();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size, true);
  run(data, size, false);
  return 0;
}
