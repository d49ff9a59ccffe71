// SPDX-License-Identifier: GPL-2.0-or-later
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "iscsi/pdu.hpp"
#include "iscsi/pdu_builder.hpp"

using namespace iscsi_doctor::iscsi;

namespace {

// 48 bytes from a hex string (whitespace ignored).
std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else
      continue;
    if (hi < 0)
      hi = v;
    else {
      out.push_back(uint8_t(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

Bhs parse(const std::string& s) {
  const auto b = hex(s);
  EXPECT_EQ(b.size(), 48u);
  auto r = parse_bhs(b);
  EXPECT_TRUE(r.has_value());
  return r.value_or(Bhs{});
}

}  // namespace

TEST(IscsiPdu, ParseNeeds48Bytes) {
  std::vector<uint8_t> b(47, 0);
  EXPECT_FALSE(parse_bhs(b).has_value());
  b.push_back(0);
  EXPECT_TRUE(parse_bhs(b).has_value());
}

TEST(IscsiPdu, ScsiCommandRead10) {
  const Bhs b = parse(
      "41 c1 00 00"                                        // SCSI Command, I; F R, ATTR simple
      "00 00 00 00"                                        // AHS 0, DSL 0
      "00 01 00 00 00 00 00 00"                            // LUN 1
      "00 00 00 14"                                        // ITT 0x14
      "00 00 10 00"                                        // EDTL 4096
      "00 00 00 2a"                                        // CmdSN 42
      "00 00 00 07"                                        // ExpStatSN 7
      "28 00 00 00 10 00 00 00 08 00 00 00 00 00 00 00");  // READ(10) LBA 0x1000, 8 blocks
  EXPECT_EQ(b.op(), Opcode::ScsiCommand);
  EXPECT_TRUE(b.immediate);
  EXPECT_TRUE(b.final());
  EXPECT_TRUE(b.read_bit());
  EXPECT_FALSE(b.write_bit());
  EXPECT_EQ(b.task_attr(), 1);
  EXPECT_EQ(b.lun, 0x0001000000000000ull);
  EXPECT_EQ(b.itt, 0x14u);
  EXPECT_EQ(b.expected_length(), 4096u);
  EXPECT_EQ(b.cmdsn(), 42u);
  EXPECT_EQ(b.exp_statsn(), 7u);
  EXPECT_EQ(b.cdb[0], 0x28);
  EXPECT_EQ(b.cdb[8], 0x08);
  EXPECT_EQ(b.pdu_length(false, false), 48u);
  EXPECT_TRUE(plausible_bhs(b, true)) << implausible_reason(b, true);
  EXPECT_FALSE(plausible_bhs(b, false));  // wrong direction
  EXPECT_STREQ(opcode_name(b.opcode), "SCSI Command");
}

TEST(IscsiPdu, ScsiCommandWriteWithImmediateData) {
  const Bhs b = parse(
      "01 a1 00 00 00 00 02 00"  // W, F; DSL 512
      "00 00 00 00 00 00 00 00 00 00 00 01 00 00 10 00 00 00 00 01 00 00 00 01"
      "2a 08 00 00 00 00 00 00 08 00 00 00 00 00 00 00");  // WRITE(10) FUA
  EXPECT_TRUE(b.write_bit());
  EXPECT_EQ(b.data_length, 512u);
  EXPECT_EQ(b.pdu_length(true, true), 48u + 4 + 512 + 4);
  EXPECT_TRUE(plausible_bhs(b, true)) << implausible_reason(b, true);
  Bhs bad = b;
  bad.flags = 0xc1;  // R on a WRITE(10)
  EXPECT_FALSE(plausible_bhs(bad, true));
  EXPECT_TRUE(plausible_bhs(bad, true, kMaxDataSegmentLength, /*strict=*/false));
  bad = b;
  bad.w20 = 100;  // immediate data above the expected length
  EXPECT_FALSE(plausible_bhs(bad, true));
}

TEST(IscsiPdu, ScsiCommandNoDataMustHaveZeroLength) {
  Bhs b = parse(
      "01 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 09"
      "00 00 00 00 00 00 00 05 00 00 00 05"
      "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");  // TEST UNIT READY
  EXPECT_TRUE(plausible_bhs(b, true)) << implausible_reason(b, true);
  b.w20 = 512;  // §11.3.1.1: no R/W bit requires EDTL 0
  EXPECT_FALSE(plausible_bhs(b, true));
}

TEST(IscsiPdu, DataIn) {
  const Bhs b = parse(
      "25 83 00 00"  // Data-In, F, U, S; status GOOD
      "00 00 02 00"  // DSL 512
      "00 00 00 00 00 00 00 00 00 00 00 14"
      "ff ff ff ff"                          // TTT
      "00 00 00 08 00 00 00 2b 00 00 00 4a"  // StatSN 8, ExpCmdSN 0x2b, MaxCmdSN 0x4a
      "00 00 00 03"                          // DataSN 3
      "00 00 06 00"                          // Buffer offset 1536
      "00 00 00 10");                        // Residual 16
  EXPECT_EQ(b.op(), Opcode::DataIn);
  EXPECT_TRUE(b.final());
  EXPECT_TRUE(b.status_bit());
  EXPECT_TRUE(b.underflow());
  EXPECT_FALSE(b.overflow());
  EXPECT_FALSE(b.ack_bit());
  EXPECT_EQ(b.status(), 0);
  EXPECT_EQ(b.ttt(), 0xffffffffu);
  EXPECT_EQ(b.statsn(), 8u);
  EXPECT_EQ(b.exp_cmdsn(), 0x2bu);
  EXPECT_EQ(b.max_cmdsn(), 0x4au);
  EXPECT_EQ(b.datasn(), 3u);
  EXPECT_EQ(b.buffer_offset(), 1536u);
  EXPECT_EQ(b.residual(), 16u);
  EXPECT_TRUE(plausible_bhs(b, false)) << implausible_reason(b, false);
  Bhs s = b;
  s.flags = 0x01;  // S without F (§11.7.3)
  EXPECT_FALSE(plausible_bhs(s, false));
  s = b;
  s.flags = 0x80;
  s.byte3 = 0x02;  // status without S
  EXPECT_FALSE(plausible_bhs(s, false));
}

TEST(IscsiPdu, DataOut) {
  const Bhs b = parse(
      "05 80 00 00 00 00 20 00"  // Data-Out F, DSL 8192
      "00 01 00 00 00 00 00 00 00 00 00 20"
      "00 00 00 05"  // TTT
      "00 00 00 00 00 00 00 09 00 00 00 00"
      "00 00 00 01"  // DataSN 1
      "00 00 20 00"  // offset 8192
      "00 00 00 00");
  EXPECT_EQ(b.op(), Opcode::DataOut);
  EXPECT_EQ(b.ttt(), 5u);
  EXPECT_EQ(b.datasn(), 1u);
  EXPECT_EQ(b.buffer_offset(), 8192u);
  EXPECT_EQ(b.exp_statsn(), 9u);
  EXPECT_TRUE(plausible_bhs(b, true)) << implausible_reason(b, true);
  Bhs x = b;
  x.w44 = 1;  // reserved
  EXPECT_FALSE(plausible_bhs(x, true));
}

TEST(IscsiPdu, R2T) {
  const Bhs b = parse(
      "31 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 20"
      "00 00 00 05 00 00 00 09 00 00 00 2b 00 00 00 4a"
      "00 00 00 00"    // R2TSN 0
      "00 00 10 00"    // offset 4096
      "00 01 00 00");  // desired 65536
  EXPECT_EQ(b.op(), Opcode::R2T);
  EXPECT_EQ(b.ttt(), 5u);
  EXPECT_EQ(b.r2tsn(), 0u);
  EXPECT_EQ(b.buffer_offset(), 4096u);
  EXPECT_EQ(b.desired_length(), 65536u);
  EXPECT_TRUE(plausible_bhs(b, false)) << implausible_reason(b, false);
  Bhs x = b;
  x.w44 = 0;
  EXPECT_FALSE(plausible_bhs(x, false));
}

TEST(IscsiPdu, ScsiResponseCheckCondition) {
  const Bhs b = parse(
      "21 80 00 02 00 00 00 14"  // response 0, CHECK CONDITION, DSL 20
      "00 00 00 00 00 00 00 00 00 00 00 14 00 00 00 00"
      "00 00 00 08 00 00 00 2b 00 00 00 4a 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(b.op(), Opcode::ScsiResponse);
  EXPECT_EQ(b.response(), 0);
  EXPECT_EQ(b.status(), 2);
  EXPECT_EQ(b.statsn(), 8u);
  EXPECT_EQ(b.pdu_length(false, false), 48u + 20);
  EXPECT_TRUE(plausible_bhs(b, false)) << implausible_reason(b, false);
  Bhs x = b;
  x.byte3 = 0x55;  // not a SAM status
  EXPECT_FALSE(plausible_bhs(x, false));
}

TEST(IscsiPdu, TaskManagement) {
  const Bhs req = parse(
      "42 81 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 30"  // I, ABORT TASK
      "00 00 00 14 00 00 00 2c 00 00 00 09 00 00 00 2a 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(req.op(), Opcode::TaskMgmtRequest);
  EXPECT_EQ(req.tmf_function(), 1);
  EXPECT_EQ(req.referenced_task_tag(), 0x14u);
  EXPECT_EQ(req.ref_cmdsn(), 0x2au);
  EXPECT_TRUE(plausible_bhs(req, true)) << implausible_reason(req, true);
  const Bhs rsp = parse(
      "22 80 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 30"
      "00 00 00 00 00 00 00 09 00 00 00 2c 00 00 00 4b 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(rsp.tmf_response(), 1);  // task not in task set
  EXPECT_TRUE(plausible_bhs(rsp, false)) << implausible_reason(rsp, false);
}

TEST(IscsiPdu, LoginRequestAndResponse) {
  const Bhs req = parse(
      "43 87 00 00 00 00 01 00"  // I; T, CSG 1, NSG 3; DSL 256
      "40 00 01 37 00 00 00 00"  // ISID 400001370000, TSIH 0
      "00 00 00 00 00 01 00 00"  // ITT 0, CID 1
      "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(req.op(), Opcode::LoginRequest);
  EXPECT_TRUE(req.transit());
  EXPECT_FALSE(req.continue_bit());
  EXPECT_EQ(req.csg(), 1);
  EXPECT_EQ(req.nsg(), 3);
  EXPECT_EQ(req.isid(), 0x400001370000ull);
  EXPECT_EQ(req.tsih(), 0);
  EXPECT_EQ(req.cid(), 1);
  EXPECT_EQ(req.data_length, 256u);
  EXPECT_TRUE(plausible_bhs(req, true)) << implausible_reason(req, true);
  EXPECT_FALSE(pdu_carries_digests(req.opcode));
  const Bhs rsp = parse(
      "23 87 00 00 00 00 00 40 40 00 01 37 00 00 00 05 00 00 00 00 00 00 00 00"
      "00 00 00 01 00 00 00 01 00 00 00 10"
      "02 01 00 00"  // status class 2 (initiator error), detail 1 (authentication failed)
      "00 00 00 00 00 00 00 00");
  EXPECT_EQ(rsp.tsih(), 5);
  EXPECT_EQ(rsp.status_class(), 2);
  EXPECT_EQ(rsp.status_detail(), 1);
  EXPECT_TRUE(plausible_bhs(rsp, false)) << implausible_reason(rsp, false);
  Bhs x = req;
  x.flags = 0xc7;  // T and C together
  EXPECT_FALSE(plausible_bhs(x, true));
  x = req;
  x.byte2 = 1;  // version-max 1 does not exist
  EXPECT_FALSE(plausible_bhs(x, true));
}

TEST(IscsiPdu, TextLogoutNopRejectAsyncSnack) {
  const Bhs text = parse(
      "44 80 00 00 00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 01 ff ff ff ff"
      "00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_TRUE(plausible_bhs(text, true)) << implausible_reason(text, true);
  EXPECT_EQ(text.ttt(), 0xffffffffu);

  const Bhs logout = parse(
      "46 81 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 40 00 01 00 00"
      "00 00 00 30 00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(logout.logout_reason(), 1);
  EXPECT_EQ(logout.cid(), 1);
  EXPECT_TRUE(plausible_bhs(logout, true)) << implausible_reason(logout, true);

  const Bhs logout_rsp = parse(
      "26 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 40 00 00 00 00"
      "00 00 00 10 00 00 00 31 00 00 00 50 00 00 00 00 00 02 00 14 00 00 00 00");
  EXPECT_EQ(logout_rsp.time2wait(), 2);
  EXPECT_EQ(logout_rsp.time2retain(), 20);
  EXPECT_TRUE(plausible_bhs(logout_rsp, false)) << implausible_reason(logout_rsp, false);

  const Bhs nop_out = parse(
      "40 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 50 ff ff ff ff"
      "00 00 00 31 00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_TRUE(plausible_bhs(nop_out, true)) << implausible_reason(nop_out, true);
  const Bhs nop_in = parse(
      "20 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 50 ff ff ff ff"
      "00 00 00 10 00 00 00 32 00 00 00 51 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_TRUE(plausible_bhs(nop_in, false)) << implausible_reason(nop_in, false);

  const Bhs reject = parse(
      "3f 80 09 00 00 00 00 30 00 00 00 00 00 00 00 00 ff ff ff ff 00 00 00 00"
      "00 00 00 11 00 00 00 32 00 00 00 51 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(reject.reject_reason(), 9);
  EXPECT_TRUE(plausible_bhs(reject, false)) << implausible_reason(reject, false);

  const Bhs async = parse(
      "32 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ff ff ff ff 00 00 00 00"
      "00 00 00 12 00 00 00 32 00 00 00 51 01 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(async.async_event(), 1);  // target requests logout
  EXPECT_TRUE(plausible_bhs(async, false)) << implausible_reason(async, false);

  const Bhs snack = parse(
      "10 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 14 ff ff ff ff"
      "00 00 00 00 00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 03");
  EXPECT_EQ(snack.snack_type(), 0);
  EXPECT_TRUE(plausible_bhs(snack, true)) << implausible_reason(snack, true);
}

TEST(IscsiPdu, RejectsGarbageAndLimits) {
  const Bhs zeros = parse(std::string(96, '0'));  // an all-zero window is a NOP-Out without F
  EXPECT_FALSE(plausible_bhs(zeros, true));
  EXPECT_TRUE(plausible_bhs(zeros, true, kMaxDataSegmentLength, false));  // lenient check passes it
  Bhs unknown = zeros;
  unknown.opcode = 0x07;
  EXPECT_FALSE(plausible_bhs(unknown, true));
  EXPECT_FALSE(plausible_bhs(unknown, true, kMaxDataSegmentLength, false));
  EXPECT_STREQ(opcode_name(0x07), "Unknown");

  // A Data-In with a DataSegmentLength above the caller's limit.
  Bhs big = parse(
      "25 00 00 00 00 ff ff ff 00 00 00 00 00 00 00 00 00 00 00 01 ff ff ff ff"
      "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(big.data_length, 0xffffffu);
  EXPECT_TRUE(plausible_bhs(big, false)) << implausible_reason(big, false);
  EXPECT_FALSE(plausible_bhs(big, false, 262144));
  EXPECT_FALSE(plausible_bhs(big, false, 262144, false));

  Bhs ahs = big;
  ahs.data_length = 0;
  ahs.ahs_words = 1;  // only SCSI Command has AHS
  EXPECT_FALSE(plausible_bhs(ahs, false));
}

TEST(IscsiPdu, OpcodeHelpers) {
  EXPECT_TRUE(is_initiator_opcode(0x01));
  EXPECT_TRUE(is_initiator_opcode(0x10));
  EXPECT_FALSE(is_initiator_opcode(0x21));
  EXPECT_FALSE(is_initiator_opcode(0x3f));
  EXPECT_STREQ(opcode_name(0x25), "Data-In");
  EXPECT_STREQ(opcode_name(0x31), "R2T");
  EXPECT_TRUE(is_known_opcode(0x3f));
  EXPECT_FALSE(is_known_opcode(0x3e));
  EXPECT_FALSE(is_known_opcode(0x40));
  EXPECT_EQ(pad4(0), 0u);
  EXPECT_EQ(pad4(1), 4u);
  EXPECT_EQ(pad4(4), 4u);
  EXPECT_EQ(pad4(5), 8u);
}

TEST(IscsiPdu, PduLengthAndEncodeRoundTrip) {
  Bhs b;
  b.opcode = uint8_t(Opcode::ScsiCommand);
  b.flags = 0xa0;
  b.itt = 0x77;
  b.w20 = 5;
  b.cdb = {0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<uint8_t> data = {1, 2, 3, 4, 5};
  const std::vector<uint8_t> ahs(20, 0xee);  // extended CDB AHS, 5 words
  const auto wire = encode_pdu(b, data, true, true, ahs);
  ASSERT_EQ(wire.size(), 48u + 20 + 4 + 8 + 4);
  const auto back = parse_bhs(wire);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ahs_words, 5);
  EXPECT_EQ(back->data_length, 5u);
  EXPECT_EQ(back->pdu_length(true, true), wire.size());
  EXPECT_EQ(back->pdu_length(false, false), 48u + 20 + 8);
  EXPECT_EQ(back->cdb, b.cdb);
  EXPECT_EQ(back->itt, 0x77u);
  // Zero-length data: no data digest.
  b.flags = 0x80;
  b.w20 = 0;
  EXPECT_EQ(encode_pdu(b, {}, true, true).size(), 52u);
}

TEST(IscsiPdu, ZeroFilledDataIsNotAHeader) {
  // Payload of zeros behind an opcode-like byte: each opcode's all-zero header fails strictly.
  for (int op = 0; op < 0x40; ++op) {
    std::vector<uint8_t> w(48, 0);
    w[0] = uint8_t(op);
    const auto b = parse_bhs(w);
    ASSERT_TRUE(b);
    EXPECT_FALSE(plausible_bhs(*b, is_initiator_opcode(uint8_t(op)))) << "opcode " << op;
    w[0] = uint8_t(op | 0x40);  // with the I bit
    EXPECT_FALSE(plausible_bhs(*parse_bhs(w), is_initiator_opcode(uint8_t(op)))) << "opcode " << op << " +I";
  }
}

TEST(IscsiPdu, StrictRulesForResync) {
  Bhs text;
  text.opcode = 0x04;
  text.flags = 0x80;
  text.itt = 5;
  text.w20 = 0xffffffff;
  EXPECT_TRUE(plausible_bhs(text, true)) << implausible_reason(text, true);
  text.flags = 0x00;  // neither F nor C
  EXPECT_FALSE(plausible_bhs(text, true));
  EXPECT_TRUE(plausible_bhs(text, true, kMaxDataSegmentLength, false));

  Bhs din;
  din.opcode = 0x25;
  din.itt = 1;
  din.data_length = 0;  // Data-In with neither data nor status
  EXPECT_FALSE(plausible_bhs(din, false));
  din.data_length = 512;
  EXPECT_TRUE(plausible_bhs(din, false)) << implausible_reason(din, false);
  din.itt = 0xffffffff;  // reserved tag
  EXPECT_FALSE(plausible_bhs(din, false));

  Bhs login;
  login.opcode = 0x23;
  login.flags = 0x81;  // T, CSG 0 → NSG 1
  login.lun = 0;       // ISID 0
  EXPECT_FALSE(plausible_bhs(login, false));
  login.lun = 0x400001370000ull << 16;
  EXPECT_TRUE(plausible_bhs(login, false)) << implausible_reason(login, false);
  login.lun = 0xc00001370000ull << 16;  // ISID type 3: reserved
  EXPECT_FALSE(plausible_bhs(login, false));
}
