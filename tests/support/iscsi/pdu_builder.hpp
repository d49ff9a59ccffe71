// SPDX-License-Identifier: GPL-2.0-or-later
// Encodes PDUs to wire bytes — for tests and fuzzers that need well-formed iSCSI streams
// (the analyzer itself only decodes).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "iscsi/pdu.hpp"

namespace iscsi_doctor::iscsi {

// The 48 BHS bytes for `b`. TotalAHSLength and DataSegmentLength are written as given. For a
// SCSI Command, bytes 32-47 come from b.cdb (the CDB overlays w32..w44, RFC 7143 §11.3).
std::array<uint8_t, kBhsLength> encode_bhs(const Bhs& b);

// BHS + AHS + [header digest] + data + padding + [data digest]. Sets ahs_words and
// data_length from the spans (ahs is padded to 4 bytes). Login PDUs get no digests (§13.1).
std::vector<uint8_t> encode_pdu(Bhs b, std::span<const uint8_t> data = {}, bool header_digest = false,
                                bool data_digest = false, std::span<const uint8_t> ahs = {});

}  // namespace iscsi_doctor::iscsi
