// SPDX-License-Identifier: GPL-2.0-or-later
#include <gtest/gtest.h>

#include <vector>

#include "scsi/cdb.hpp"

using namespace iscsi_doctor::scsi;

namespace {
Cdb dec(std::vector<uint8_t> b, DeviceType t = DeviceType::disk) {
  b.resize(16, 0);  // as carried in the iSCSI BHS
  auto c = decode_cdb(b, t);
  EXPECT_TRUE(c.has_value());
  return c.value_or(Cdb{});
}
}  // namespace

TEST(ScsiCdb, ReadWrite6) {
  // READ(6): LBA 0x1f2345 (21 bits), 0 blocks means 256
  auto c = dec({0x08, 0xff, 0x23, 0x45, 0x00, 0x00});
  EXPECT_EQ(c.name, "READ(6)");
  EXPECT_EQ(c.dir, Direction::read);
  EXPECT_EQ(c.lba, 0x1f2345u);
  EXPECT_EQ(c.blocks, 256u);
  EXPECT_EQ(c.cdb_length, 6);
  c = dec({0x0a, 0x00, 0x00, 0x10, 0x08, 0x00});  // WRITE(6) LBA 16, 8 blocks
  EXPECT_EQ(c.name, "WRITE(6)");
  EXPECT_EQ(c.dir, Direction::write);
  EXPECT_EQ(c.lba, 16u);
  EXPECT_EQ(c.blocks, 8u);
}

TEST(ScsiCdb, TapeReadWrite6) {
  // SSC READ(6) FIXED=1, 0x000102 blocks; no LBA on tape, name unchanged
  auto c = dec({0x08, 0x01, 0x00, 0x01, 0x02, 0x00}, DeviceType::tape);
  EXPECT_EQ(c.name, "READ(6)");
  EXPECT_TRUE(c.fixed);
  EXPECT_EQ(c.blocks, 0x102u);
  EXPECT_FALSE(c.lba.has_value());
  c = dec({0x0a, 0x00, 0x01, 0x00, 0x00, 0x00}, DeviceType::tape);  // variable: 65536 bytes
  EXPECT_EQ(c.name, "WRITE(6)");
  EXPECT_FALSE(c.fixed);
  EXPECT_EQ(c.blocks, 0x10000u);
  EXPECT_EQ(dec({0x1b}, DeviceType::tape).name, "LOAD UNLOAD");
  EXPECT_EQ(dec({0x05}, DeviceType::tape).name, "READ BLOCK LIMITS");
  EXPECT_EQ(dec({0x01}, DeviceType::tape).name, "REWIND");
}

TEST(ScsiCdb, ReadWrite10And12And16) {
  // READ(10) DPO FUA, LBA 0x12345678, 0x0100 blocks
  auto c = dec({0x28, 0x18, 0x12, 0x34, 0x56, 0x78, 0x00, 0x01, 0x00, 0x00});
  EXPECT_EQ(c.name, "READ(10)");
  EXPECT_EQ(c.lba, 0x12345678u);
  EXPECT_EQ(c.blocks, 256u);
  EXPECT_TRUE(c.fua);
  EXPECT_TRUE(c.dpo);
  EXPECT_TRUE(c.is_read_write());
  c = dec({0x2a, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x08, 0x00});
  EXPECT_EQ(c.name, "WRITE(10)");
  EXPECT_EQ(c.lba, 0x20u);
  EXPECT_EQ(c.blocks, 8u);
  EXPECT_FALSE(c.fua);
  c = dec({0xa8, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00});
  EXPECT_EQ(c.name, "READ(12)");
  EXPECT_EQ(c.lba, 0x100u);
  EXPECT_EQ(c.blocks, 0x10000u);
  EXPECT_EQ(c.cdb_length, 12);
  c = dec({0xaa, 0x08, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04});
  EXPECT_EQ(c.name, "WRITE(12)");
  EXPECT_TRUE(c.fua);
  EXPECT_EQ(c.blocks, 4u);
  // READ(16): LBA 0x0000000123456789 (beyond 32 bits), 0x800 blocks
  c = dec({0x88, 0x00, 0x00, 0x00, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00});
  EXPECT_EQ(c.name, "READ(16)");
  EXPECT_EQ(c.lba, 0x123456789ull);
  EXPECT_EQ(c.blocks, 0x800u);
  EXPECT_EQ(c.cdb_length, 16);
  c = dec({0x8a, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0xff, 0xff});
  EXPECT_EQ(c.name, "WRITE(16)");
  EXPECT_EQ(c.lba, 0xfffffffffffffff0ull);
  EXPECT_EQ(c.blocks, 0xffffffffu);
  EXPECT_TRUE(c.fua);
}

TEST(ScsiCdb, WriteSameVerifySyncCompareAndWrite) {
  auto c = dec({0x41, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00});
  EXPECT_EQ(c.name, "WRITE SAME(10)");
  EXPECT_EQ(c.lba, 0x1000u);
  EXPECT_EQ(c.blocks, 0x80u);
  c = dec({0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0x10, 0x00});
  EXPECT_EQ(c.name, "WRITE SAME(16)");
  EXPECT_EQ(c.lba, 0x40u);
  EXPECT_EQ(c.blocks, 0x1000u);
  c = dec({0x2f, 0x00, 0, 0, 0, 5, 0, 0, 3, 0});  // VERIFY(10) BYTCHK=0: no data
  EXPECT_EQ(c.name, "VERIFY(10)");
  EXPECT_EQ(c.dir, Direction::none);
  EXPECT_EQ(c.blocks, 3u);
  c = dec({0x2f, 0x02, 0, 0, 0, 5, 0, 0, 3, 0});  // BYTCHK=1: data out
  EXPECT_EQ(c.dir, Direction::write);
  EXPECT_EQ(dec({0x8f, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}).name, "VERIFY(16)");
  EXPECT_EQ(dec({0xaf}).name, "VERIFY(12)");
  c = dec({0x35, 0x00, 0, 0, 0x10, 0, 0, 0, 0, 0});  // SYNCHRONIZE CACHE(10), 0 blocks = to the end
  EXPECT_EQ(c.name, "SYNCHRONIZE CACHE(10)");
  EXPECT_EQ(c.dir, Direction::none);
  EXPECT_EQ(c.lba, 0x1000u);
  EXPECT_EQ(c.blocks, 0u);
  c = dec({0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0x10});
  EXPECT_EQ(c.name, "SYNCHRONIZE CACHE(16)");
  EXPECT_EQ(c.lba, 0x20u);
  EXPECT_EQ(c.blocks, 0x10u);
  c = dec({0x89, 0x00, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0, 0, 0, 0x01});
  EXPECT_EQ(c.name, "COMPARE AND WRITE");
  EXPECT_EQ(c.dir, Direction::write);
  EXPECT_EQ(c.lba, 0x100u);
  EXPECT_EQ(c.blocks, 1u);
}

TEST(ScsiCdb, SpcCommands) {
  auto c = dec({0x12, 0x01, 0x83, 0x00, 0xff, 0x00});  // INQUIRY EVPD page 0x83, 255 bytes
  EXPECT_EQ(c.name, "INQUIRY");
  EXPECT_EQ(c.dir, Direction::read);
  EXPECT_EQ(c.length_bytes, 255u);
  EXPECT_EQ(dec({0x00}).name, "TEST UNIT READY");
  EXPECT_EQ(dec({0x00}).dir, Direction::none);
  c = dec({0x03, 0, 0, 0, 0x60, 0});
  EXPECT_EQ(c.name, "REQUEST SENSE");
  EXPECT_EQ(c.length_bytes, 0x60u);
  c = dec({0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0});
  EXPECT_EQ(c.name, "REPORT LUNS");
  EXPECT_EQ(c.length_bytes, 0x1000u);
  c = dec({0x1a, 0x08, 0x3f, 0, 0xc0, 0});
  EXPECT_EQ(c.name, "MODE SENSE(6)");
  EXPECT_EQ(c.length_bytes, 0xc0u);
  c = dec({0x5a, 0, 0x3f, 0, 0, 0, 0, 0x01, 0x00, 0});
  EXPECT_EQ(c.name, "MODE SENSE(10)");
  EXPECT_EQ(c.length_bytes, 256u);
  EXPECT_EQ(dec({0x15, 0x10, 0, 0, 0x18, 0}).name, "MODE SELECT(6)");
  EXPECT_EQ(dec({0x15, 0x10, 0, 0, 0x18, 0}).dir, Direction::write);
  EXPECT_EQ(dec({0x55}).name, "MODE SELECT(10)");
  c = dec({0x42, 0, 0, 0, 0, 0, 0, 0, 0x18, 0});
  EXPECT_EQ(c.name, "UNMAP");
  EXPECT_EQ(c.dir, Direction::write);
  EXPECT_EQ(c.length_bytes, 0x18u);
  c = dec({0x5e, 0x01, 0, 0, 0, 0, 0, 0x10, 0x00, 0});
  EXPECT_EQ(c.name, "PERSISTENT RESERVE IN");
  EXPECT_EQ(c.service_action, 1);
  EXPECT_EQ(c.length_bytes, 0x1000u);
  c = dec({0x5f, 0x01, 0, 0, 0, 0, 0, 0, 0x18, 0});
  EXPECT_EQ(c.name, "PERSISTENT RESERVE OUT");
  EXPECT_EQ(c.length_bytes, 0x18u);
  EXPECT_EQ(dec({0x1b, 0, 0, 0, 1, 0}).name, "START STOP UNIT");
  EXPECT_EQ(dec({0x1e, 0, 0, 0, 1, 0}).name, "PREVENT ALLOW MEDIUM REMOVAL");
  c = dec({0x3c, 0x02, 0, 0, 0, 0, 0x01, 0x00, 0x00, 0});
  EXPECT_EQ(c.name, "READ BUFFER");
  EXPECT_EQ(c.length_bytes, 0x10000u);
  EXPECT_EQ(dec({0x3b, 0x05, 0, 0, 0, 0, 0, 0x10, 0, 0}).name, "WRITE BUFFER");
  EXPECT_EQ(dec({0x3b, 0x05, 0, 0, 0, 0, 0, 0x10, 0, 0}).dir, Direction::write);
  c = dec({0x4d, 0, 0x40, 0, 0, 0, 0, 0x02, 0x00, 0});
  EXPECT_EQ(c.name, "LOG SENSE");
  EXPECT_EQ(c.length_bytes, 512u);
  EXPECT_EQ(dec({0x04, 0x10, 0, 0, 0, 0}).name, "FORMAT UNIT");
  EXPECT_EQ(dec({0x04, 0x10, 0, 0, 0, 0}).dir, Direction::write);
  EXPECT_EQ(dec({0x04, 0x00, 0, 0, 0, 0}).dir, Direction::none);
  EXPECT_EQ(dec({0x16}).name, "RESERVE(6)");
  EXPECT_EQ(dec({0x17}).name, "RELEASE(6)");
  EXPECT_EQ(dec({0x56}).name, "RESERVE(10)");
  EXPECT_EQ(dec({0x57}).name, "RELEASE(10)");
}

TEST(ScsiCdb, ServiceActions) {
  auto c = dec({0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0});
  EXPECT_EQ(c.name, "READ CAPACITY(16)");
  EXPECT_EQ(c.service_action, 0x10);
  EXPECT_EQ(c.length_bytes, 32u);
  EXPECT_EQ(dec({0x9e, 0x1f}).name, "SERVICE ACTION IN(16)");
  EXPECT_EQ(dec({0x25}).name, "READ CAPACITY(10)");
  EXPECT_EQ(dec({0x25}).length_bytes, 8u);
  c = dec({0xa3, 0x0c, 0x00, 0, 0, 0, 0x00, 0x00, 0x10, 0x00, 0, 0});
  EXPECT_EQ(c.name, "REPORT SUPPORTED OPERATION CODES");
  EXPECT_EQ(c.length_bytes, 0x1000u);
  EXPECT_EQ(dec({0xa3, 0x0a}).name, "REPORT TARGET PORT GROUPS");
  EXPECT_EQ(dec({0xa3, 0x05}).name, "MAINTENANCE IN");
}

TEST(ScsiCdb, AtaPassThrough) {
  // ATA PASS-THROUGH(16): T_DIR=1 (from device), T_LENGTH=2 → read
  auto c = dec({0x85, 0x08, 0x0e, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xec, 0});
  EXPECT_EQ(c.name, "ATA PASS-THROUGH(16)");
  EXPECT_EQ(c.dir, Direction::read);
  EXPECT_EQ(dec({0xa1, 0x08, 0x06}).dir, Direction::write);  // T_DIR=0
  EXPECT_EQ(dec({0xa1, 0x06, 0x00}).dir, Direction::none);   // T_LENGTH=0
  EXPECT_EQ(dec({0xa1}).name, "ATA PASS-THROUGH(12)");
}

TEST(ScsiCdb, CdromChangerAndVariableLength) {
  auto c = dec({0x43, 0x02, 0, 0, 0, 0, 0, 0x03, 0x24, 0});
  EXPECT_EQ(c.name, "READ TOC/PMA/ATIP");
  EXPECT_EQ(c.length_bytes, 0x324u);
  EXPECT_EQ(dec({0xb8, 0x10, 0, 0, 0, 0, 0, 0x00, 0x10, 0x00, 0, 0}).name, "READ ELEMENT STATUS");
  EXPECT_EQ(dec({0xa5}).name, "MOVE MEDIUM");
  EXPECT_EQ(dec({0xa5}, DeviceType::cdrom).name, "PLAY AUDIO(12)");
  EXPECT_EQ(dec({0x07}, DeviceType::changer).name, "INITIALIZE ELEMENT STATUS");
  // 0x7f: OSD READ (service action 0x8805), additional CDB length 0x18 → 32-byte CDB
  std::vector<uint8_t> osd(32, 0);
  osd[0] = 0x7f;
  osd[7] = 0x18;
  osd[8] = 0x88;
  osd[9] = 0x05;
  auto v = decode_cdb(osd);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->name, "VARIABLE LENGTH");
  EXPECT_EQ(v->cdb_length, 32);
  EXPECT_TRUE(v->known);
  // Only the first 16 bytes (the BHS CDB field) are needed for the name.
  EXPECT_TRUE(decode_cdb(std::span(osd).first(16)));
}

TEST(ScsiCdb, UnknownAndShort) {
  auto c = dec({0xc5, 1, 2});
  EXPECT_EQ(c.name, "0xc5");
  EXPECT_FALSE(c.known);
  EXPECT_EQ(c.dir, Direction::none);
  EXPECT_EQ(dec({0x10}).name, "0x10");  // WRITE FILEMARKS only on tape
  EXPECT_EQ(dec({0x10}, DeviceType::tape).name, "WRITE FILEMARKS(6)");
  EXPECT_FALSE(decode_cdb({}).has_value());
  const std::vector<uint8_t> short10 = {0x28, 0, 0, 0, 0};
  EXPECT_FALSE(decode_cdb(short10).has_value());  // READ(10) needs 10 bytes
  const std::vector<uint8_t> short16 = {0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(decode_cdb(short16).has_value());
  EXPECT_EQ(cdb_length_for_opcode(0x28), 10);
  EXPECT_EQ(cdb_length_for_opcode(0xa0), 12);
  EXPECT_EQ(cdb_length_for_opcode(0x60), 0);  // group 3: reserved
  EXPECT_EQ(cdb_length_for_opcode(0xc0), 0);  // vendor specific
}

TEST(ScsiCdb, DeviceTypeFromInquiry) {
  EXPECT_EQ(device_type_from_inquiry(0x00), DeviceType::disk);
  EXPECT_EQ(device_type_from_inquiry(0x01), DeviceType::tape);
  EXPECT_EQ(device_type_from_inquiry(0x05), DeviceType::cdrom);
  EXPECT_EQ(device_type_from_inquiry(0x28), DeviceType::changer);  // qualifier bits ignored
  EXPECT_EQ(device_type_from_inquiry(0x11), DeviceType::other);
}

TEST(ScsiStatus, Names) {
  EXPECT_EQ(status_name(0x00), "GOOD");
  EXPECT_EQ(status_name(0x02), "CHECK_CONDITION");
  EXPECT_EQ(status_name(0x08), "BUSY");
  EXPECT_EQ(status_name(0x18), "RESERVATION_CONFLICT");
  EXPECT_EQ(status_name(0x28), "TASK_SET_FULL");
  EXPECT_EQ(status_name(0x30), "ACA_ACTIVE");
  EXPECT_EQ(status_name(0x40), "TASK_ABORTED");
  EXPECT_EQ(status_name(0x01), "");
  EXPECT_TRUE(status_known(0x28));
  EXPECT_FALSE(status_known(0x55));
}

TEST(ScsiSense, FixedFormat) {
  // 70h, key 5 ILLEGAL REQUEST, add. length 10, ASC 24h ASCQ 00h INVALID FIELD IN CDB
  const std::vector<uint8_t> s = {0x70, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00,
                                  0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00};
  auto r = parse_sense(s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->response_code, 0x70);
  EXPECT_EQ(r->key, 5);
  EXPECT_EQ(r->asc, 0x24);
  EXPECT_EQ(r->ascq, 0x00);
  EXPECT_TRUE(r->has_asc);
  EXPECT_FALSE(r->deferred);
  EXPECT_FALSE(r->information);
  EXPECT_EQ(sense_key_name(r->key), "ILLEGAL_REQUEST");
  EXPECT_EQ(asc_name(r->asc, r->ascq), "INVALID FIELD IN CDB");
  // VALID bit with INFORMATION 0x00001234; deferred (71h); MEDIUM ERROR 11/00
  const std::vector<uint8_t> d = {0xf1, 0x00, 0x03, 0x00, 0x00, 0x12, 0x34, 0x0a, 0, 0, 0, 0, 0x11, 0x00};
  r = parse_sense(d);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->deferred);
  EXPECT_EQ(r->information, 0x1234u);
  EXPECT_EQ(r->key, 3);
  EXPECT_EQ(r->asc, 0x11);
}

TEST(ScsiSense, DescriptorFormat) {
  // 72h, key 6 UNIT ATTENTION, 29h/00h; information descriptor 0x00 with VALID and 0xabcdef
  const std::vector<uint8_t> s = {0x72, 0x06, 0x29, 0x00, 0, 0, 0, 0x0c, 0x00, 0x0a,
                                  0x80, 0x00, 0,    0,    0, 0, 0, 0xab, 0xcd, 0xef};
  auto r = parse_sense(s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, 6);
  EXPECT_EQ(r->asc, 0x29);
  EXPECT_EQ(r->ascq, 0x00);
  EXPECT_EQ(r->information, 0xabcdefu);
  EXPECT_EQ(sense_key_name(r->key), "UNIT_ATTENTION");
  EXPECT_EQ(asc_name(0x29, 0x00), "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED");
  // Descriptor lengths that overrun the data are ignored, not followed.
  std::vector<uint8_t> bad = {0x73, 0x02, 0x04, 0x01, 0, 0, 0, 0xff, 0x00, 0x40};
  r = parse_sense(bad);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->deferred);
  EXPECT_EQ(r->asc, 0x04);
  EXPECT_FALSE(r->information);
}

TEST(ScsiSense, ShortAndUnknown) {
  EXPECT_FALSE(parse_sense({}));
  const std::vector<uint8_t> two = {0x70, 0x00};
  EXPECT_FALSE(parse_sense(two));
  const std::vector<uint8_t> three = {0x70, 0x00, 0x02};  // key only
  auto r = parse_sense(three);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, 2);
  EXPECT_FALSE(r->has_asc);
  const std::vector<uint8_t> desc3 = {0x72, 0x05, 0x20};
  EXPECT_FALSE(parse_sense(desc3));
  const std::vector<uint8_t> vendor = {0x7f, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0};
  EXPECT_FALSE(parse_sense(vendor));
  EXPECT_EQ(sense_key_name(0x0b), "ABORTED_COMMAND");
  EXPECT_EQ(sense_key_name(0x20), "NO_SENSE");  // key & 0x0f
  EXPECT_EQ(asc_name(0x7e, 0xee), "");
  EXPECT_EQ(asc_name(0xee, 0xee), "VENDOR SPECIFIC");
}

TEST(ScsiSense, IscsiSenseLengthPrefix) {
  // SenseLength 0x0012 then 18 bytes of fixed sense (RFC 7143 §11.4.7.2)
  std::vector<uint8_t> seg = {0x00, 0x12, 0x70, 0x00, 0x06, 0,    0, 0, 0, 0x0a,
                              0,    0,    0,    0,    0x3f, 0x0e, 0, 0, 0, 0};
  EXPECT_EQ(iscsi_sense_bytes(seg).size(), 18u);
  auto r = parse_iscsi_sense(seg);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, 6);
  EXPECT_EQ(r->asc, 0x3f);
  EXPECT_EQ(r->ascq, 0x0e);
  // SenseLength larger than what is present: clipped, still parsed
  seg[1] = 0xff;
  EXPECT_EQ(iscsi_sense_bytes(seg).size(), 18u);
  EXPECT_TRUE(parse_iscsi_sense(seg));
  // SenseLength 0, or too short
  const std::vector<uint8_t> zero = {0x00, 0x00, 0x70};
  EXPECT_TRUE(iscsi_sense_bytes(zero).empty());
  EXPECT_FALSE(parse_iscsi_sense(zero));
  const std::vector<uint8_t> one = {0x00};
  EXPECT_FALSE(parse_iscsi_sense(one));
}
