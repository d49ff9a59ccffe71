// SPDX-License-Identifier: GPL-2.0-or-later
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "iscsi/login_keys.hpp"

using namespace iscsi_doctor::iscsi;

namespace {

template <size_t N>
std::vector<uint8_t> text(const char (&s)[N]) {
  return std::vector<uint8_t>(s, s + N - 1);
}
std::vector<uint8_t> text(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// flags: T 0x80, C 0x40, CSG << 2, NSG
Bhs login_req(uint8_t flags) {
  Bhs b;
  b.opcode = 0x03;
  b.immediate = true;
  b.flags = flags;
  return b;
}
Bhs login_rsp(uint8_t flags, uint8_t status_class = 0, uint8_t detail = 0) {
  Bhs b;
  b.opcode = 0x23;
  b.flags = flags;
  b.w36 = (uint32_t(status_class) << 24) | (uint32_t(detail) << 16);
  return b;
}
Bhs text_req(uint8_t flags = 0x80) {
  Bhs b;
  b.opcode = 0x04;
  b.flags = flags;
  return b;
}
Bhs text_rsp(uint8_t flags = 0x80) {
  Bhs b;
  b.opcode = 0x24;
  b.flags = flags;
  return b;
}

}  // namespace

TEST(IscsiTextKeys, ParsesPairs) {
  const auto keys =
      parse_text_keys(text("InitiatorName=iqn.1991-05.com.microsoft:host\0MaxBurstLength=262144\0"));
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], (TextKey{"InitiatorName", "iqn.1991-05.com.microsoft:host"}));
  EXPECT_EQ(keys[1], (TextKey{"MaxBurstLength", "262144"}));
}

TEST(IscsiTextKeys, ToleratesMissingNulAndGarbage) {
  // no final NUL; an item without '='; empty items; a bad key; padding NULs; value with '='
  const auto keys = parse_text_keys(text("A=1\0\0garbage\0=novalue\0bad key=x\0X-com.ex=a=b\0\0\0Last=z"));
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], (TextKey{"A", "1"}));
  EXPECT_EQ(keys[1], (TextKey{"X-com.ex", "a=b"}));
  EXPECT_EQ(keys[2], (TextKey{"Last", "z"}));
  EXPECT_TRUE(parse_text_keys({}).empty());
  EXPECT_EQ(parse_text_keys(text("K=")).at(0), (TextKey{"K", ""}));
  // key longer than 63 bytes is ignored
  EXPECT_TRUE(parse_text_keys(text(std::string(64, 'k') + "=v")).empty());
  EXPECT_EQ(parse_text_keys(text(std::string(63, 'k') + "=v")).size(), 1u);
  // binary junk in a value is kept, clipped at 8192 bytes
  const auto big = parse_text_keys(text("CHAP_C=" + std::string(10000, 'f')));
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].value.size(), 8192u);
}

TEST(IscsiTextKeys, Numbers) {
  EXPECT_EQ(parse_number("8192"), 8192u);
  EXPECT_EQ(parse_number("0x2000"), 8192u);
  EXPECT_EQ(parse_number("0X10"), 16u);
  EXPECT_FALSE(parse_number(""));
  EXPECT_FALSE(parse_number("0x"));
  EXPECT_FALSE(parse_number("12a"));
  EXPECT_FALSE(parse_number("-1"));
  EXPECT_EQ(parse_number("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(parse_number("18446744073709551616"));
}

TEST(IscsiNegotiation, DefaultsBeforeAnything) {
  Negotiation n;
  const auto& r = n.result();
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.header_digest.value, Digest::None);
  EXPECT_FALSE(r.header_digest.seen);
  EXPECT_EQ(r.initiator_max_recv_data_segment.value, 8192u);
  EXPECT_EQ(r.first_burst_length.value, 65536u);
  EXPECT_EQ(r.max_burst_length.value, 262144u);
  EXPECT_TRUE(r.immediate_data.value);
  EXPECT_TRUE(r.initial_r2t.value);
  EXPECT_EQ(r.max_outstanding_r2t.value, 1u);
  EXPECT_EQ(r.session_type.value, "Normal");
  EXPECT_FALSE(n.framer_config().digests_known);
}

TEST(IscsiNegotiation, FullLoginWithContinuedPdus) {
  Negotiation n;
  // Security stage: CSG 0 → NSG 1 (flags 0x81)
  n.add_pdu(login_req(0x81), text("InitiatorName=iqn.2004-10.com.ubuntu:01:abc\0SessionType=Normal\0"
                                  "TargetName=iqn.2001-04.com.example:disk1\0AuthMethod=None\0"));
  n.add_pdu(login_rsp(0x81), text("TargetPortalGroupTag=1\0AuthMethod=None\0"));
  // Operational stage, the initiator's offer split over two PDUs with C, cutting a pair in half.
  n.add_pdu(login_req(0x44), text("HeaderDigest=CRC32C,None\0DataDigest=CRC32C,None\0MaxRecvDataSeg"));
  EXPECT_FALSE(n.result().header_digest.seen);  // nothing parsed until the text is complete
  n.add_pdu(login_req(0x87),
            text("mentLength=262144\0InitialR2T=No\0ImmediateData=Yes\0MaxBurstLength=16776192\0"
                 "FirstBurstLength=262144\0MaxOutstandingR2T=1\0ErrorRecoveryLevel=2\0"
                 "DefaultTime2Wait=2\0DefaultTime2Retain=0\0"));
  // The target answers, also continued (C bit, T clear), then finishes.
  n.add_pdu(login_rsp(0x44), text("HeaderDigest=CRC32C\0DataDigest=None\0MaxRecvDataSegmentLength=65536\0"));
  EXPECT_FALSE(n.result().complete);
  n.add_pdu(login_rsp(0x87),
            text("InitialR2T=Yes\0ImmediateData=No\0MaxBurstLength=262144\0FirstBurstLength=65536\0"
                 "ErrorRecoveryLevel=0\0DefaultTime2Wait=5\0DefaultTime2Retain=0\0TargetAlias=lun-a"));
  const auto& r = n.result();
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.initiator_name.value, "iqn.2004-10.com.ubuntu:01:abc");
  EXPECT_EQ(r.target_name.value, "iqn.2001-04.com.example:disk1");
  EXPECT_EQ(r.target_alias.value, "lun-a");  // no final NUL
  EXPECT_EQ(r.target_portal_group_tag.value, "1");
  EXPECT_EQ(r.header_digest.value, Digest::CRC32C);
  EXPECT_TRUE(r.header_digest.seen);
  EXPECT_EQ(r.data_digest.value, Digest::None);
  EXPECT_TRUE(r.data_digest.seen);
  EXPECT_EQ(r.initiator_max_recv_data_segment.value, 262144u);  // joined across the C boundary
  EXPECT_EQ(r.target_max_recv_data_segment.value, 65536u);
  EXPECT_TRUE(r.initial_r2t.value);      // OR(No, Yes)
  EXPECT_FALSE(r.immediate_data.value);  // AND(Yes, No)
  EXPECT_EQ(r.max_burst_length.value, 262144u);
  EXPECT_EQ(r.first_burst_length.value, 65536u);
  EXPECT_EQ(r.error_recovery_level.value, 0u);
  EXPECT_EQ(r.default_time2wait.value, 5u);    // max
  EXPECT_EQ(r.default_time2retain.value, 0u);  // min
  EXPECT_EQ(r.max_outstanding_r2t.value, 1u);
  EXPECT_FALSE(r.max_outstanding_r2t.seen);  // offered, never answered
  EXPECT_FALSE(r.data_pdu_in_order.seen);
  const auto fc = n.framer_config();
  EXPECT_TRUE(fc.digests_known);
  EXPECT_TRUE(fc.header_digest);
  EXPECT_FALSE(fc.data_digest);
  ASSERT_FALSE(r.keys_seen.empty());
  EXPECT_EQ(r.keys_seen.front().key, "InitiatorName");
  EXPECT_TRUE(r.keys_seen.front().from_initiator);
  EXPECT_TRUE(r.keys_seen.front().in_login);
  EXPECT_EQ(r.keys_seen.back().key, "TargetAlias");
  EXPECT_FALSE(r.keys_seen.back().from_initiator);
}

TEST(IscsiNegotiation, BooleanResultFunctions) {
  struct Case {
    const char *key, *offer, *answer;
    bool want;
  };
  const Case cases[] = {
      {"ImmediateData", "Yes", "Yes", true}, {"ImmediateData", "Yes", "No", false},
      {"ImmediateData", "No", "Yes", false}, {"InitialR2T", "No", "No", false},
      {"InitialR2T", "No", "Yes", true},     {"InitialR2T", "Yes", "No", true},
      {"DataPDUInOrder", "No", "No", false}, {"DataSequenceInOrder", "No", "Yes", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " " + c.offer + "/" + c.answer);
    Negotiation n;
    n.add_pdu(login_req(0x87), text(std::string(c.key) + "=" + c.offer + std::string(1, '\0')));
    n.add_pdu(login_rsp(0x87), text(std::string(c.key) + "=" + c.answer + std::string(1, '\0')));
    const auto& r = n.result();
    const auto& s = std::string(c.key) == "ImmediateData"    ? r.immediate_data
                    : std::string(c.key) == "InitialR2T"     ? r.initial_r2t
                    : std::string(c.key) == "DataPDUInOrder" ? r.data_pdu_in_order
                                                             : r.data_sequence_in_order;
    EXPECT_EQ(s.value, c.want);
    EXPECT_TRUE(s.seen);
  }
}

TEST(IscsiNegotiation, OfferAloneDecidesWhenRfcSaysSo) {
  // §6.2.2: AND offered No / OR offered Yes need no answer.
  Negotiation n;
  n.add_pdu(login_req(0x87), text("ImmediateData=No\0InitialR2T=Yes\0DataPDUInOrder=No\0"));
  n.add_pdu(login_rsp(0x87), {});
  EXPECT_FALSE(n.result().immediate_data.value);
  EXPECT_TRUE(n.result().immediate_data.seen);
  EXPECT_TRUE(n.result().initial_r2t.value);
  EXPECT_TRUE(n.result().initial_r2t.seen);
  EXPECT_FALSE(n.result().data_pdu_in_order.seen);  // OR with No needs the answer
  EXPECT_TRUE(n.result().data_pdu_in_order.value);
}

TEST(IscsiNegotiation, NumericalAndRejectHandling) {
  Negotiation n;
  n.add_pdu(login_req(0x87), text("MaxBurstLength=1048576\0FirstBurstLength=65536\0MaxOutstandingR2T=8\0"
                                  "MaxConnections=4\0DefaultTime2Wait=0x0\0ErrorRecoveryLevel=1\0"
                                  "X-vendor.key=1\0HeaderDigest=CRC32C\0"));
  n.add_pdu(login_rsp(0x87), text("MaxBurstLength=524288\0FirstBurstLength=Reject\0MaxOutstandingR2T=0x10\0"
                                  "MaxConnections=Irrelevant\0DefaultTime2Wait=3\0ErrorRecoveryLevel=7\0"
                                  "X-vendor.key=NotUnderstood\0HeaderDigest=CRC32C,None\0"));
  const auto& r = n.result();
  EXPECT_EQ(r.max_burst_length.value, 524288u);  // min
  EXPECT_TRUE(r.max_burst_length.seen);
  EXPECT_EQ(r.first_burst_length.value, 65536u);  // Reject: default kept
  EXPECT_FALSE(r.first_burst_length.seen);
  EXPECT_EQ(r.max_outstanding_r2t.value, 8u);  // min(8, 16)
  EXPECT_FALSE(r.max_connections.seen);        // Irrelevant
  EXPECT_EQ(r.default_time2wait.value, 3u);    // max(0, 3)
  EXPECT_FALSE(r.error_recovery_level.seen);   // 7 is out of range
  EXPECT_FALSE(r.header_digest.seen);          // an answer must be a single offered value
  EXPECT_EQ(r.keys_seen.size(), 16u);
}

TEST(IscsiNegotiation, TargetOffersAndRenegotiationInText) {
  Negotiation n;
  n.add_pdu(login_req(0x87), text("MaxRecvDataSegmentLength=8192\0"));
  // The target originates MaxBurstLength; the initiator answers in its next PDU.
  n.add_pdu(login_rsp(0x83), text("MaxBurstLength=65536\0"));
  n.add_pdu(login_req(0x87), text("MaxBurstLength=32768\0"));
  n.add_pdu(login_rsp(0x87), {});
  EXPECT_EQ(n.result().max_burst_length.value, 32768u);
  EXPECT_TRUE(n.result().complete);
  // Full Feature Phase: a Text exchange renegotiates MaxRecvDataSegmentLength (declarative).
  n.add_pdu(text_req(), text("MaxRecvDataSegmentLength=131072\0"));
  n.add_pdu(text_rsp(), text("MaxRecvDataSegmentLength=16384\0"));
  EXPECT_EQ(n.result().initiator_max_recv_data_segment.value, 131072u);
  EXPECT_EQ(n.result().target_max_recv_data_segment.value, 16384u);
  // SendTargets answers name other targets: not this session's TargetName.
  n.add_pdu(text_req(), text("SendTargets=All\0"));
  n.add_pdu(text_rsp(), text("TargetName=iqn.other\0TargetAddress=10.0.0.9:3260,1\0"));
  EXPECT_FALSE(n.result().target_name.seen);
  EXPECT_FALSE(n.result().target_address.seen);
}

TEST(IscsiNegotiation, FailedLogin) {
  Negotiation n;
  n.add_pdu(login_req(0x81), text("InitiatorName=iqn.x\0TargetName=iqn.missing\0"));
  n.add_pdu(login_rsp(0x00, 0x02, 0x03), {});  // initiator error: target not found
  EXPECT_TRUE(n.result().failed);
  EXPECT_FALSE(n.result().complete);
  EXPECT_EQ(n.result().status_class, 2);
  EXPECT_EQ(n.result().status_detail, 3);
}

TEST(IscsiNegotiation, TruncatedDataDropsCutPair) {
  Negotiation n;
  n.add_pdu(login_req(0x87), text("MaxBurstLength=65536\0FirstBurstLength=6"), /*data_truncated=*/true);
  n.add_pdu(login_rsp(0x87), text("MaxBurstLength=65536\0FirstBurstLength=65536\0"));
  EXPECT_TRUE(n.result().max_burst_length.seen);
  EXPECT_FALSE(n.result().first_burst_length.seen);  // the offer "6" was cut off
}

TEST(IscsiNegotiation, IgnoresOtherOpcodes) {
  Negotiation n;
  Bhs cmd;
  cmd.opcode = 0x01;
  n.add_pdu(cmd, text("HeaderDigest=CRC32C\0"));
  EXPECT_TRUE(n.result().keys_seen.empty());
}
