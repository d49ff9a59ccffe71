// SPDX-License-Identifier: GPL-2.0-or-later
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "iscsi/framer.hpp"
#include "iscsi/pdu_builder.hpp"

using namespace iscsi_doctor::iscsi;

namespace {

// ---- PDU makers (field values per RFC 7143 §11) ----

Bhs login_request(uint8_t flags = 0x87) {  // T, CSG 1, NSG 3
  Bhs b;
  b.opcode = 0x03;
  b.immediate = true;
  b.flags = flags;
  b.lun = 0x400001370000ull << 16;
  b.w20 = 0x00010000;  // CID 1
  return b;
}
Bhs login_response(uint8_t flags = 0x87) {
  Bhs b;
  b.opcode = 0x23;
  b.flags = flags;
  b.lun = (0x400001370000ull << 16) | 5;
  b.w24 = 1;
  b.w28 = 1;
  b.w32 = 16;
  return b;
}
Bhs scsi_cmd(uint32_t itt, uint8_t flags, uint32_t edtl, std::array<uint8_t, 16> cdb) {
  Bhs b;
  b.opcode = 0x01;
  b.flags = flags;
  b.itt = itt;
  b.w20 = edtl;
  b.w24 = itt;
  b.cdb = cdb;
  return b;
}
Bhs read10(uint32_t itt) { return scsi_cmd(itt, 0xc1, 4096, {0x28, 0, 0, 0, 0x10, 0, 0, 0, 8}); }
Bhs write10(uint32_t itt, bool final) {
  return scsi_cmd(itt, uint8_t((final ? 0x80 : 0) | 0x21), 4096, {0x2a, 0, 0, 0, 0x20, 0, 0, 0, 8});
}
Bhs data_out(uint32_t itt, uint32_t offset, bool final) {
  Bhs b;
  b.opcode = 0x05;
  b.flags = final ? 0x80 : 0;
  b.itt = itt;
  b.w20 = 0xffffffff;
  b.w40 = offset;
  return b;
}
Bhs data_in(uint32_t itt, uint32_t offset, bool status) {
  Bhs b;
  b.opcode = 0x25;
  b.flags = status ? 0x81 : 0x00;
  b.itt = itt;
  b.w20 = 0xffffffff;
  b.w40 = offset;
  return b;
}
Bhs r2t(uint32_t itt) {
  Bhs b;
  b.opcode = 0x31;
  b.flags = 0x80;
  b.itt = itt;
  b.w20 = 7;
  b.w44 = 4096;
  return b;
}
Bhs scsi_response(uint32_t itt, uint8_t status) {
  Bhs b;
  b.opcode = 0x21;
  b.flags = 0x80;
  b.byte3 = status;
  b.itt = itt;
  return b;
}
Bhs nop_out() {
  Bhs b;
  b.opcode = 0x00;
  b.immediate = true;
  b.flags = 0x80;
  b.itt = 0x99;
  b.w20 = 0xffffffff;
  return b;
}
Bhs nop_in() {
  Bhs b;
  b.opcode = 0x20;
  b.flags = 0x80;
  b.itt = 0x99;
  b.w20 = 0xffffffff;
  return b;
}
Bhs logout_request() {
  Bhs b;
  b.opcode = 0x06;
  b.immediate = true;
  b.flags = 0x81;
  b.itt = 0x100;
  return b;
}
Bhs logout_response() {
  Bhs b;
  b.opcode = 0x26;
  b.flags = 0x80;
  b.itt = 0x100;
  return b;
}

// Text with embedded NULs: the literal's length, minus its terminating NUL.
template <size_t N>
std::vector<uint8_t> text(const char (&s)[N]) {
  return std::vector<uint8_t>(s, s + N - 1);
}
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uint8_t(seed + i * 7);
  return v;
}

struct Expected {
  uint8_t opcode;
  uint64_t first, last;  // stream offsets
  bool has_data = false;
};

struct Stream {
  std::vector<uint8_t> bytes;
  std::vector<Expected> pdus;
  void add(const Bhs& b, std::span<const uint8_t> data = {}, bool hd = false, bool dd = false,
           std::span<const uint8_t> ahs = {}) {
    const auto w = encode_pdu(b, data, hd, dd, ahs);
    pdus.push_back({b.opcode, bytes.size(), bytes.size() + w.size() - 1, !data.empty()});
    bytes.insert(bytes.end(), w.begin(), w.end());
  }
};

Stream initiator_stream(bool hd, bool dd) {
  Stream s;
  const auto keys = text("InitiatorName=iqn.x\0HeaderDigest=CRC32C,None\0");  // 45 bytes: padding 3
  s.add(login_request(), keys, hd, dd);
  s.add(read10(1), {}, hd, dd);
  const auto imm = pattern(1000, 1);
  s.add(write10(2, false), imm, hd, dd);
  const auto out = pattern(3096, 2);
  s.add(data_out(2, 1000, true), out, hd, dd);
  std::array<uint8_t, 16> cdb7f{0x7f, 0, 0, 0, 0, 0, 0, 0x18, 0x88, 0x05};
  const auto ahs = pattern(20, 3);  // extended CDB AHS, 5 words
  s.add(scsi_cmd(3, 0x80, 0, cdb7f), {}, hd, dd, ahs);
  s.add(nop_out(), pattern(5, 4), hd, dd);  // 5 bytes ping data: padding 3
  s.add(logout_request(), {}, hd, dd);
  return s;
}

Stream target_stream(bool hd, bool dd) {
  Stream s;
  s.add(login_response(), text("TargetAlias=disk\0HeaderDigest=None\0"), hd, dd);
  s.add(data_in(1, 0, false), pattern(4096, 5), hd, dd);
  s.add(data_in(1, 4096, true), pattern(100, 6), hd, dd);
  s.add(r2t(2), {}, hd, dd);
  // Sense: SenseLength 18, fixed format ILLEGAL REQUEST / INVALID FIELD IN CDB
  std::vector<uint8_t> sense = {0x00, 0x12, 0x70, 0x00, 0x05, 0,    0, 0, 0, 0x0a,
                                0,    0,    0,    0,    0x24, 0x00, 0, 0, 0, 0};
  s.add(scsi_response(2, 0x02), sense, hd, dd);
  s.add(nop_in(), pattern(5, 7), hd, dd);
  s.add(logout_response(), {}, hd, dd);
  return s;
}

struct Event {
  char kind = 0;  // 'S' start, 'E' end, 'L' sync lost, 'R' resync
  uint8_t opcode = 0;
  uint64_t first = 0, last = 0;
  DigestCheck hd = DigestCheck::absent, dd = DigestCheck::absent;
  bool incomplete = false, truncated = false;
  std::vector<uint8_t> kept;
  std::string why;
};

// Records events and checks every Position against the chunk being fed.
struct Recorder : FramerSink {
  std::vector<Event> ev;
  uint64_t chunk_base = 0, chunk_len = 0;
  int position_errors = 0;
  void check(const Position& p) {
    const bool inside = p.stream_offset >= chunk_base && p.stream_offset < chunk_base + chunk_len;
    if (inside != p.in_this_chunk) ++position_errors;
    if (inside && p.chunk_offset != p.stream_offset - chunk_base) ++position_errors;
    if (!inside && p.chunk_offset != 0) ++position_errors;
  }
  void on_pdu_start(const PduStart& s) override {
    check(s.first_byte);
    Event x;
    x.kind = 'S';
    x.opcode = s.bhs.opcode;
    x.first = s.first_byte.stream_offset;
    x.hd = s.header_digest;
    ev.push_back(x);
  }
  void on_pdu_end(const PduEnd& e) override {
    check(e.first_byte);
    check(e.last_byte);
    Event x;
    x.kind = 'E';
    x.opcode = e.bhs.opcode;
    x.first = e.first_byte.stream_offset;
    x.last = e.last_byte.stream_offset;
    x.hd = e.header_digest;
    x.dd = e.data_digest;
    x.incomplete = e.data_incomplete;
    x.truncated = e.truncated;
    x.kept.assign(e.kept_data.begin(), e.kept_data.end());
    ev.push_back(x);
  }
  void on_sync_lost(const SyncLost& l) override {
    check(l.at);
    Event x;
    x.kind = 'L';
    x.first = l.at.stream_offset;
    x.why = l.why;
    ev.push_back(x);
  }
  void on_resync(const Resync& r) override {
    check(r.first_byte);
    Event x;
    x.kind = 'R';
    x.first = r.first_byte.stream_offset;
    ev.push_back(x);
  }
  std::vector<Event> ends() const {
    std::vector<Event> out;
    for (const auto& e : ev)
      if (e.kind == 'E') out.push_back(e);
    return out;
  }
  int count(char k) const {
    int n = 0;
    for (const auto& e : ev)
      n += e.kind == k;
    return n;
  }
};

struct Feeder {
  Framer framer;
  Recorder rec;
  uint64_t pos = 0;
  explicit Feeder(bool from_initiator, FramerConfig c = {}) : framer(from_initiator, c) {}
  void feed(std::span<const uint8_t> chunk) {
    rec.chunk_base = pos;
    rec.chunk_len = chunk.size();
    framer.feed(chunk, rec);
    pos += chunk.size();
  }
  void gap(uint64_t n) {
    rec.chunk_base = pos;
    rec.chunk_len = 0;
    framer.gap(n, rec);
    pos += n;
  }
  void finish() {
    rec.chunk_base = pos;
    rec.chunk_len = 0;
    framer.finish(rec);
  }
};

// The ends must match the expected PDUs exactly, each preceded by its start.
void expect_framed(const Recorder& rec, const std::vector<Expected>& want,
                   DigestCheck hd = DigestCheck::absent, DigestCheck dd = DigestCheck::absent,
                   bool digests_on_login = false) {
  ASSERT_EQ(rec.position_errors, 0);
  const auto ends = rec.ends();
  ASSERT_EQ(ends.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ends[i].opcode, want[i].opcode);
    EXPECT_EQ(ends[i].first, want[i].first);
    EXPECT_EQ(ends[i].last, want[i].last);
    EXPECT_FALSE(ends[i].incomplete);
    EXPECT_FALSE(ends[i].truncated);
    const bool login = want[i].opcode == 0x03 || want[i].opcode == 0x23;
    if (!login || digests_on_login)
      EXPECT_EQ(ends[i].hd, hd);
    else
      EXPECT_EQ(ends[i].hd, DigestCheck::absent);
  }
  (void)dd;
  EXPECT_EQ(rec.count('S'), int(want.size()));
  EXPECT_EQ(rec.count('L'), 0);
}

void feed_chunked(Feeder& f, const std::vector<uint8_t>& bytes, const std::vector<size_t>& cuts) {
  size_t prev = 0;
  for (size_t c : cuts) {
    f.feed(std::span(bytes).subspan(prev, c - prev));
    prev = c;
  }
  f.feed(std::span(bytes).subspan(prev));
}

}  // namespace

TEST(IscsiFramer, WholeStreamBothDirections) {
  for (bool ini : {true, false}) {
    const Stream s = ini ? initiator_stream(false, false) : target_stream(false, false);
    Feeder f(ini, FramerConfig{false, false, true});
    f.feed(s.bytes);
    expect_framed(f.rec, s.pdus);
    EXPECT_TRUE(f.framer.in_sync());
    EXPECT_EQ(f.framer.stats().pdus, s.pdus.size());
    EXPECT_EQ(f.framer.stats().bytes_fed, s.bytes.size());
    // Whole stream in one chunk: every position is chunk-relative.
    for (const auto& e : f.rec.ev)
      EXPECT_LT(e.last, s.bytes.size());
  }
}

TEST(IscsiFramer, ChunkOffsetsWhenFedWhole) {
  const Stream s = target_stream(false, false);
  struct Sink : FramerSink {
    std::vector<std::pair<size_t, size_t>> spans;
    void on_pdu_start(const PduStart& p) override { EXPECT_TRUE(p.first_byte.in_this_chunk); }
    void on_pdu_end(const PduEnd& e) override {
      EXPECT_TRUE(e.last_byte.in_this_chunk);
      spans.emplace_back(e.first_byte.chunk_offset, e.last_byte.chunk_offset);
    }
    void on_sync_lost(const SyncLost&) override { ADD_FAILURE(); }
    void on_resync(const Resync&) override { ADD_FAILURE(); }
  } sink;
  Framer f(false);
  f.feed(s.bytes, sink);
  ASSERT_EQ(sink.spans.size(), s.pdus.size());
  // Login Response: 48 + 35 text bytes → padded 36 → last byte at 83.
  EXPECT_EQ(sink.spans[0], (std::pair<size_t, size_t>{0, 83}));
  EXPECT_EQ(sink.spans[1], (std::pair<size_t, size_t>{84, 84 + 48 + 4096 - 1}));
}

TEST(IscsiFramer, ByteByByte) {
  for (bool ini : {true, false}) {
    const Stream s = ini ? initiator_stream(false, false) : target_stream(false, false);
    Feeder f(ini);
    for (size_t i = 0; i < s.bytes.size(); ++i)
      f.feed(std::span(s.bytes).subspan(i, 1));
    expect_framed(f.rec, s.pdus);
  }
}

TEST(IscsiFramer, EverySplitPoint) {
  for (bool ini : {true, false}) {
    const Stream s = ini ? initiator_stream(false, false) : target_stream(false, false);
    for (size_t cut = 0; cut <= s.bytes.size(); ++cut) {
      SCOPED_TRACE(cut);
      Feeder f(ini);
      feed_chunked(f, s.bytes, {cut});
      expect_framed(f.rec, s.pdus);
      if (HasFailure()) return;
    }
  }
}

TEST(IscsiFramer, RandomChunkingsWithDigests) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    const bool ini = round & 1, hd = round & 2, dd = round & 4, known = round & 8;
    const Stream s = ini ? initiator_stream(hd, dd) : target_stream(hd, dd);
    std::vector<size_t> cuts;
    size_t at = 0;
    while (true) {
      at += 1 + rng() % (round % 3 == 0 ? 7 : 300);
      if (at >= s.bytes.size()) break;
      cuts.push_back(at);
    }
    SCOPED_TRACE(round);
    Feeder f(ini, FramerConfig{hd, dd, known});
    feed_chunked(f, s.bytes, cuts);
    f.finish();
    expect_framed(f.rec, s.pdus, hd ? DigestCheck::ok : DigestCheck::absent);
    const auto ends = f.rec.ends();
    for (size_t i = 0; i < ends.size(); ++i) {
      const bool has_dd = dd && s.pdus[i].has_data && ends[i].opcode != 0x03 && ends[i].opcode != 0x23;
      EXPECT_EQ(ends[i].dd, has_dd ? DigestCheck::ok : DigestCheck::absent) << int(ends[i].opcode);
    }
    EXPECT_EQ(f.framer.header_digest(), std::optional<bool>(hd));
    EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(dd));
    if (HasFailure()) return;
  }
}

TEST(IscsiFramer, DigestsDetectedAfterLogin) {
  const Stream s = initiator_stream(true, true);
  Feeder f(true);  // digests not known
  EXPECT_FALSE(f.framer.header_digest().has_value());
  f.feed(s.bytes);
  expect_framed(f.rec, s.pdus, DigestCheck::ok);
  EXPECT_EQ(f.framer.header_digest(), std::optional<bool>(true));
  EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(true));
  EXPECT_EQ(f.framer.stats().header_digest_errors, 0u);
}

TEST(IscsiFramer, NoDigestsDetected) {
  const Stream s = target_stream(false, false);
  Feeder f(false);
  f.feed(s.bytes);
  expect_framed(f.rec, s.pdus);
  EXPECT_EQ(f.framer.header_digest(), std::optional<bool>(false));
  EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(false));
}

TEST(IscsiFramer, HeaderOnlyDigestDetected) {
  const Stream s = target_stream(true, false);
  Feeder f(false);
  f.feed(s.bytes);
  expect_framed(f.rec, s.pdus, DigestCheck::ok);
  EXPECT_EQ(f.framer.header_digest(), std::optional<bool>(true));
  EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(false));
}

TEST(IscsiFramer, DigestMismatchReportedAndFramingContinues) {
  Stream s = target_stream(true, true);
  // Flip a data byte of the first Data-In (PDU 1) and a header byte (ITT) of the R2T (PDU 3).
  s.bytes[s.pdus[1].first + 52 + 10] ^= 0x01;
  s.bytes[s.pdus[3].first + 19] ^= 0x40;
  Feeder f(false, FramerConfig{true, true, true});
  f.feed(s.bytes);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), s.pdus.size());
  EXPECT_EQ(ends[1].dd, DigestCheck::bad);
  EXPECT_EQ(ends[1].hd, DigestCheck::ok);
  EXPECT_EQ(ends[3].hd, DigestCheck::bad);
  EXPECT_EQ(ends[2].dd, DigestCheck::ok);
  EXPECT_EQ(ends[4].dd, DigestCheck::ok);
  EXPECT_EQ(f.framer.stats().data_digest_errors, 1u);
  EXPECT_EQ(f.framer.stats().header_digest_errors, 1u);
  EXPECT_EQ(f.rec.count('L'), 0);
}

TEST(IscsiFramer, DataDigestDetectedEvenWhenFirstDataIsCorrupt) {
  Stream s = target_stream(false, true);
  s.bytes[s.pdus[1].first + 48 + 100] ^= 0xff;  // corrupt the first data segment after login
  Feeder f(false);
  f.feed(s.bytes);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), s.pdus.size());
  EXPECT_EQ(ends[1].dd, DigestCheck::bad);  // decided by where the next BHS starts
  EXPECT_EQ(ends[2].dd, DigestCheck::ok);
  EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(true));
  EXPECT_EQ(f.rec.count('L'), 0);
}

TEST(IscsiFramer, KeptData) {
  const Stream s = target_stream(false, false);
  Feeder f(false);
  feed_chunked(f, s.bytes, {60, 61, 300, 4300});
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 7u);
  EXPECT_EQ(std::string(ends[0].kept.begin(), ends[0].kept.end()),
            std::string("TargetAlias=disk\0HeaderDigest=None\0", 35));
  EXPECT_TRUE(ends[1].kept.empty());     // Data-In without status: skipped
  EXPECT_EQ(ends[2].kept.size(), 100u);  // Data-In with S
  EXPECT_EQ(ends[4].kept.size(), 20u);   // sense
  EXPECT_EQ(ends[4].kept[1], 0x12);
  EXPECT_TRUE(ends[5].kept.empty());  // ping data
}

TEST(IscsiFramer, SenseKeptIsCapped) {
  Stream s;
  s.add(scsi_response(9, 0x02), pattern(1000, 9));
  Feeder f(false);
  f.feed(s.bytes);
  struct Cap : FramerSink {
    bool truncated = false;
    size_t n = 0;
    void on_pdu_start(const PduStart&) override {}
    void on_pdu_end(const PduEnd& e) override {
      n = e.kept_data.size();
      truncated = e.kept_truncated;
    }
    void on_sync_lost(const SyncLost&) override {}
    void on_resync(const Resync&) override {}
  } cap;
  Framer g(false);
  g.feed(s.bytes, cap);
  EXPECT_EQ(cap.n, 0u);  // digest presence still undecided: the end waits for the next bytes
  g.finish(cap);
  EXPECT_EQ(cap.n, kKeepSense);
  EXPECT_TRUE(cap.truncated);
}

TEST(IscsiFramer, GapInsideDataSegment) {
  for (bool dd : {false, true}) {
    const Stream s = target_stream(false, dd);
    const uint64_t data_start = s.pdus[1].first + 48;
    Feeder f(false, FramerConfig{false, dd, true});
    f.feed(std::span(s.bytes).first(data_start + 100));
    f.gap(1000);  // inside the 4096-byte Data-In
    f.feed(std::span(s.bytes).subspan(data_start + 1100));
    const auto ends = f.rec.ends();
    ASSERT_EQ(ends.size(), s.pdus.size());
    EXPECT_TRUE(ends[1].incomplete);
    EXPECT_EQ(ends[1].dd, dd ? DigestCheck::unchecked : DigestCheck::absent);
    EXPECT_EQ(ends[1].last, s.pdus[1].last);
    for (size_t i = 2; i < ends.size(); ++i)
      EXPECT_FALSE(ends[i].incomplete);
    EXPECT_EQ(f.rec.count('L'), 0);
    EXPECT_EQ(f.framer.stats().bytes_lost, 1000u);
    EXPECT_EQ(f.framer.stats().data_incomplete_pdus, 1u);
  }
}

TEST(IscsiFramer, GapEndingTheDataSegmentExactly) {
  const Stream s = target_stream(false, false);
  Feeder f(false, FramerConfig{false, false, true});
  f.feed(std::span(s.bytes).first(s.pdus[1].first + 48));
  f.gap(4096);  // the whole data segment, up to the PDU end
  f.feed(std::span(s.bytes).subspan(s.pdus[2].first));
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), s.pdus.size());
  EXPECT_TRUE(ends[1].incomplete);
  EXPECT_EQ(ends[1].last, s.pdus[1].last);
  EXPECT_EQ(f.rec.count('L'), 0);
}

TEST(IscsiFramer, GapAcrossHeaderLosesSyncThenResyncs) {
  const Stream s = target_stream(false, false);
  Feeder f(false);
  // Lose from the middle of Data-In #1's data through the first 20 bytes of Data-In #2's header.
  const uint64_t from = s.pdus[1].first + 48 + 2000, to = s.pdus[2].first + 20;
  f.feed(std::span(s.bytes).first(from));
  f.gap(to - from);
  EXPECT_FALSE(f.framer.in_sync());
  f.feed(std::span(s.bytes).subspan(to));
  const auto ends = f.rec.ends();
  ASSERT_GE(ends.size(), 2u);
  EXPECT_TRUE(ends[1].incomplete);  // the Data-In whose data ran into the gap still ends
  ASSERT_EQ(f.rec.count('L'), 1);
  ASSERT_EQ(f.rec.count('R'), 1);
  // Everything after the lost header is framed again, starting with the R2T.
  std::vector<Expected> rest(s.pdus.begin() + 3, s.pdus.end());
  ASSERT_EQ(ends.size(), 2 + rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(ends[2 + i].opcode, rest[i].opcode);
    EXPECT_EQ(ends[2 + i].first, rest[i].first);
    EXPECT_EQ(ends[2 + i].last, rest[i].last);
  }
  EXPECT_TRUE(f.framer.in_sync());
  EXPECT_EQ(f.framer.stats().resyncs, 1u);
}

TEST(IscsiFramer, GapAtPduBoundaryLosesSync) {
  const Stream s = target_stream(false, false);
  Feeder f(false);
  f.feed(std::span(s.bytes).first(s.pdus[3].first));
  f.gap(10);
  f.feed(std::span(s.bytes).subspan(s.pdus[3].first + 10));
  EXPECT_EQ(f.rec.count('L'), 1);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 3u + 3u);  // login, 2 Data-In; then SCSI Response, NOP-In, Logout
  EXPECT_EQ(ends[3].opcode, 0x21);
  EXPECT_EQ(ends[3].first, s.pdus[4].first);
}

TEST(IscsiFramer, StartUnsyncedInsideDataSegment) {
  for (size_t chunk : {size_t(1), size_t(13), size_t(100), size_t(100000)}) {
    SCOPED_TRACE(chunk);
    const Stream s = target_stream(false, false);
    const uint64_t start = s.pdus[1].first + 48 + 777;  // inside Data-In #1's data
    std::vector<uint8_t> tail(s.bytes.begin() + ptrdiff_t(start), s.bytes.end());
    Feeder f(false);
    f.framer.start_unsynced();
    EXPECT_FALSE(f.framer.in_sync());
    for (size_t i = 0; i < tail.size(); i += chunk)
      f.feed(std::span(tail).subspan(i, std::min(chunk, tail.size() - i)));
    EXPECT_EQ(f.rec.count('L'), 0);
    EXPECT_EQ(f.rec.count('R'), 1);
    const auto ends = f.rec.ends();
    ASSERT_EQ(ends.size(), s.pdus.size() - 2);
    for (size_t i = 0; i < ends.size(); ++i) {
      EXPECT_EQ(ends[i].opcode, s.pdus[i + 2].opcode);
      EXPECT_EQ(ends[i].first + start, s.pdus[i + 2].first);
    }
    // The pattern bytes of the data segment are all skipped.
    EXPECT_EQ(f.framer.stats().bytes_skipped_unsynced, s.pdus[2].first - start);
  }
}

TEST(IscsiFramer, StartUnsyncedWithHeaderDigestKnown) {
  const Stream s = initiator_stream(true, true);
  const uint64_t start = s.pdus[2].first + 52 + 5;  // inside the WRITE's immediate data
  std::vector<uint8_t> tail(s.bytes.begin() + ptrdiff_t(start), s.bytes.end());
  Feeder f(true, FramerConfig{true, true, true});
  f.framer.start_unsynced();
  for (size_t i = 0; i < tail.size(); i += 29)
    f.feed(std::span(tail).subspan(i, std::min<size_t>(29, tail.size() - i)));
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), s.pdus.size() - 3);
  for (const auto& e : ends)
    EXPECT_EQ(e.hd, DigestCheck::ok);
  EXPECT_EQ(ends[0].opcode, 0x05);
}

TEST(IscsiFramer, GarbageLosesSyncWithoutCrashing) {
  std::mt19937 rng(99);
  std::vector<uint8_t> junk(5000);
  for (auto& b : junk)
    b = uint8_t(rng());
  junk[0] = 0x07;  // an unknown opcode right away
  const Stream s = initiator_stream(false, false);
  std::vector<uint8_t> all = junk;
  all.insert(all.end(), s.bytes.begin(), s.bytes.end());
  Feeder f(true);
  for (size_t i = 0; i < all.size(); i += 64)
    f.feed(std::span(all).subspan(i, std::min<size_t>(64, all.size() - i)));
  f.finish();
  EXPECT_GE(f.rec.count('L'), 1);
  EXPECT_STREQ(f.rec.ev[0].why.c_str(), "unknown opcode");
  // The real PDUs after the junk are found again (the login may be the resync point).
  const auto ends = f.rec.ends();
  ASSERT_GE(ends.size(), s.pdus.size());
  const auto tail = std::vector<Event>(ends.end() - ptrdiff_t(s.pdus.size()), ends.end());
  for (size_t i = 0; i < tail.size(); ++i)
    EXPECT_EQ(tail[i].first, s.pdus[i].first + junk.size());
  EXPECT_TRUE(f.framer.in_sync());
}

TEST(IscsiFramer, HugeDataSegmentIsStreamed) {
  // A Data-In with a 16 MiB - 1 data segment, fed in 64 KiB chunks, then a SCSI Response.
  Bhs big = data_in(1, 0, false);
  big.data_length = 0xffffff;
  const auto head = encode_bhs(big);
  Feeder f(false);
  f.feed(head);
  std::vector<uint8_t> chunk(65536, 0x5a);
  uint64_t left = pad4(0xffffff);
  while (left) {
    const size_t n = size_t(std::min<uint64_t>(left, chunk.size()));
    f.feed(std::span(chunk).first(n));
    left -= n;
  }
  Stream s;
  s.add(scsi_response(1, 0));
  f.feed(s.bytes);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].last, 48u + pad4(0xffffff) - 1);
  EXPECT_EQ(ends[1].opcode, 0x21);
  // With a lower limit the same header is implausible: sync is lost.
  Feeder g(false, FramerConfig{false, false, true, 1 << 20});
  g.feed(head);
  EXPECT_EQ(g.rec.count('L'), 1);
  EXPECT_EQ(g.rec.ev[0].why, "DataSegmentLength above limit");
}

TEST(IscsiFramer, FinishReportsTruncatedPdu) {
  const Stream s = target_stream(false, false);
  Feeder f(false);
  f.feed(std::span(s.bytes).first(s.pdus[1].first + 48 + 10));
  f.finish();
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_TRUE(ends[1].truncated);
  EXPECT_EQ(f.rec.count('S'), 2);
}

TEST(IscsiFramer, SetConfigAppliesToNextPdu) {
  // Login without digests, then digests switched on by the caller (as after login negotiation).
  Stream login;
  login.add(login_request(), text("HeaderDigest=CRC32C\0"));
  Stream ffp;
  ffp.add(read10(1), {}, true, true);
  ffp.add(write10(2, true), pattern(4096, 1), true, true);
  Feeder f(true);
  f.feed(login.bytes);
  f.framer.set_config(FramerConfig{true, true, true});
  f.feed(ffp.bytes);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[1].hd, DigestCheck::ok);
  EXPECT_EQ(ends[2].dd, DigestCheck::ok);
  EXPECT_EQ(ends[2].last - ends[2].first + 1, 48u + 4 + 4096 + 4);
}

TEST(IscsiFramer, WrongDirectionIsImplausible) {
  const Stream s = target_stream(false, false);
  Feeder f(true);  // target PDUs fed as if from the initiator
  f.feed(s.bytes);
  EXPECT_EQ(f.rec.count('E'), 0);
  EXPECT_EQ(f.rec.count('L'), 1);
  EXPECT_FALSE(f.framer.in_sync());
}

TEST(IscsiFramer, GapWhileHeaderDigestUndetectedResyncs) {
  // The 4 bytes after the first header would decide the header digest; they are lost, so the
  // framer cannot tell where the data starts: it gives up sync and finds the next header.
  const Stream s = target_stream(false, false);
  Feeder f(false);
  f.feed(std::span(s.bytes).first(s.pdus[1].first + 48));
  f.gap(4096);
  f.feed(std::span(s.bytes).subspan(s.pdus[2].first));
  ASSERT_EQ(f.rec.count('L'), 1);
  EXPECT_EQ(f.rec.count('R'), 1);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), s.pdus.size() - 1);
  EXPECT_EQ(ends[1].first, s.pdus[2].first);
  EXPECT_EQ(ends.back().last, s.pdus.back().last);
}

TEST(IscsiFramer, UndetectedDataDigestDelaysEndOnlyByFourBytes) {
  // No login seen, digests unknown: the first PDU with data cannot end before the framer has
  // seen what follows it. Four bytes that start a plausible header are enough.
  Stream s;
  std::vector<uint8_t> sense = {0x00, 0x12, 0x70, 0x00, 0x06, 0,    0, 0, 0, 0x0a,
                                0,    0,    0,    0,    0x29, 0x00, 0, 0, 0, 0};
  s.add(scsi_response(2, 0x02), sense);
  s.add(nop_in());
  Feeder f(false);
  f.feed(std::span(s.bytes).first(s.pdus[0].last + 1));
  EXPECT_EQ(f.rec.count('E'), 0);  // no lookahead yet
  f.feed(std::span(s.bytes).subspan(s.pdus[0].last + 1, 4));
  ASSERT_EQ(f.rec.count('E'), 1);
  const auto e = f.rec.ends()[0];
  EXPECT_EQ(e.last, s.pdus[0].last);
  EXPECT_EQ(e.dd, DigestCheck::absent);
  EXPECT_EQ(f.framer.data_digest(), std::optional<bool>(false));
  f.feed(std::span(s.bytes).subspan(s.pdus[0].last + 5));
  EXPECT_EQ(f.rec.count('E'), 2);
  EXPECT_EQ(f.rec.position_errors, 0);
}

TEST(IscsiFramer, NoLoginResyncAfterFullFeaturePhase) {
  // A Data-In whose payload holds a well-formed Login Response header, then a SCSI Response.
  const auto fake = encode_pdu(login_response(0x81));
  std::vector<uint8_t> payload(16, 0xaa);
  payload.insert(payload.end(), fake.begin(), fake.end());
  payload.resize(256, 0xaa);
  Stream s;
  s.add(data_in(1, 0, false), payload);
  s.add(scsi_response(1, 0));
  // Joined mid-way inside the data: the Login lookalike is skipped.
  const uint64_t start = s.pdus[0].first + 48 + 3;
  std::vector<uint8_t> tail(s.bytes.begin() + ptrdiff_t(start), s.bytes.end());
  Feeder f(false, FramerConfig{false, false, true});
  f.framer.start_unsynced();
  f.feed(tail);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].opcode, 0x21);
  EXPECT_EQ(ends[0].first + start, s.pdus[1].first);
  // In sync from the start the payload is never scanned at all.
  Feeder g(false, FramerConfig{false, false, true});
  g.feed(s.bytes);
  expect_framed(g.rec, s.pdus);
}

TEST(IscsiFramer, LoginResyncStillPossibleDuringLogin) {
  // Garbage before the first Login Request (sync lost at byte 0), nothing else seen: Login
  // headers remain valid resync points.
  Stream s;
  s.add(login_request(), text("InitiatorName=iqn.x\0"));
  std::vector<uint8_t> all = {0x07, 0x01, 0x02};
  all.insert(all.end(), s.bytes.begin(), s.bytes.end());
  Feeder f(true);
  f.feed(all);
  EXPECT_EQ(f.rec.count('L'), 1);
  const auto ends = f.rec.ends();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].opcode, 0x03);
  EXPECT_EQ(ends[0].first, 3u);
}

// docs/rules.md "Ports": a SCSI Command found by searching inside a chunk is believed only once
// it chains; random bytes that pass the strict checks by chance give no command.
TEST(IscsiFramer, CommandFoundInsideChunkHeldUntilItChains) {
  const auto cmd = encode_pdu(read10(1), {}, false, false, {});
  const auto next = encode_pdu(read10(2), {}, false, false, {});
  auto joined = [&](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> v(30, 0);  // zeros: no strict header
    for (const auto& p : parts)
      v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  {  // followed by bytes that are no strict header: dropped, sync lost
    Feeder f(true);
    f.framer.start_unsynced();
    f.feed(joined({cmd, std::vector<uint8_t>(100, 0)}));
    f.finish();
    EXPECT_EQ(f.rec.count('S'), 0);
    EXPECT_EQ(f.rec.count('E'), 0);
    EXPECT_GE(f.rec.count('L'), 1);
    EXPECT_EQ(f.rec.position_errors, 0);
  }
  {  // followed by the next command in a later chunk: both, at their offsets
    Feeder f(true);
    f.framer.start_unsynced();
    const auto a = joined({cmd, std::vector<uint8_t>(next.begin(), next.begin() + 10)});
    f.feed(a);
    EXPECT_EQ(f.rec.count('S'), 0);  // held: its successor's header is not whole yet
    auto rest = std::vector<uint8_t>(next.begin() + 10, next.end());
    rest.insert(rest.end(), 4, 0);  // what tells the successor has no header digest
    f.feed(rest);
    const auto ends = f.rec.ends();
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[0].first, 30u);
    EXPECT_EQ(ends[1].first, 30u + cmd.size());
    EXPECT_EQ(f.rec.position_errors, 0);
  }
  {  // ending where its chunk ends: believed then (its end known once the next 4 bytes show no
     // header digest), whatever follows
    Feeder f(true);
    f.framer.start_unsynced();
    f.feed(joined({cmd}));
    f.feed(std::vector<uint8_t>(100, 0));
    EXPECT_EQ(f.rec.ends().size(), 1u);
    EXPECT_EQ(f.rec.position_errors, 0);
  }
  {  // at a chunk's first byte, where senders begin PDUs: believed at once
    Feeder f(true);
    f.framer.start_unsynced();
    f.feed(std::vector<uint8_t>(30, 0));
    auto b = cmd;
    b.insert(b.end(), 20, 0);
    f.feed(b);
    EXPECT_EQ(f.rec.ends().size(), 1u);
  }
  {  // the capture ends before it chains: dropped
    Feeder f(true);
    f.framer.start_unsynced();
    f.feed(joined({cmd, std::vector<uint8_t>(next.begin(), next.begin() + 10)}));
    f.finish();
    EXPECT_EQ(f.rec.count('S'), 0);
  }
}

TEST(IscsiFramer, FirstHeaderOfStreamMustPassStrictChecks) {
  Feeder f(true, FramerConfig{false, false, true});
  f.feed(std::vector<uint8_t>(200, 0));  // a NOP-Out by the loose checks, not by the strict ones
  EXPECT_EQ(f.rec.count('S'), 0);
  EXPECT_GE(f.rec.count('L'), 1);
}
