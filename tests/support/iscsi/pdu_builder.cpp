// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/pdu_builder.hpp"

#include "iscsi/crc32c.hpp"

namespace iscsi_doctor::iscsi {
namespace {
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = uint8_t(v >> (24 - 8 * i));
}
void put_digest(std::vector<uint8_t>& out, size_t from) {
  std::array<uint8_t, 4> d{};
  digest_to_wire(crc32c_of(std::span<const uint8_t>(out).subspan(from)), d);
  out.insert(out.end(), d.begin(), d.end());
}
}  // namespace

std::array<uint8_t, kBhsLength> encode_bhs(const Bhs& b) {
  std::array<uint8_t, kBhsLength> o{};
  o[0] = uint8_t((b.byte0 & 0xc0) | (b.opcode & 0x3f) | (b.immediate ? 0x40 : 0));
  o[1] = b.flags;
  o[2] = b.byte2;
  o[3] = b.byte3;
  o[4] = b.ahs_words;
  o[5] = uint8_t(b.data_length >> 16);
  o[6] = uint8_t(b.data_length >> 8);
  o[7] = uint8_t(b.data_length);
  for (int i = 0; i < 8; ++i)
    o[8 + i] = uint8_t(b.lun >> (56 - 8 * i));
  put32(&o[16], b.itt);
  const uint32_t w[] = {b.w20, b.w24, b.w28, b.w32, b.w36, b.w40, b.w44};
  for (int i = 0; i < 7; ++i)
    put32(&o[20 + 4 * i], w[i]);
  if (b.opcode == uint8_t(Opcode::ScsiCommand))
    for (int i = 0; i < 16; ++i)
      o[32 + i] = b.cdb[i];
  return o;
}

std::vector<uint8_t> encode_pdu(Bhs b, std::span<const uint8_t> data, bool header_digest, bool data_digest,
                                std::span<const uint8_t> ahs) {
  const bool digests = pdu_carries_digests(b.opcode);
  b.ahs_words = uint8_t(pad4(uint32_t(ahs.size())) / 4);
  b.data_length = uint32_t(data.size());
  const auto h = encode_bhs(b);
  std::vector<uint8_t> out(h.begin(), h.end());
  out.insert(out.end(), ahs.begin(), ahs.end());
  out.resize(pad4(uint32_t(out.size())), 0);
  if (header_digest && digests) put_digest(out, 0);
  const size_t data_at = out.size();
  out.insert(out.end(), data.begin(), data.end());
  out.resize(data_at + pad4(uint32_t(data.size())), 0);
  if (data_digest && digests && !data.empty()) put_digest(out, data_at);
  return out;
}

}  // namespace iscsi_doctor::iscsi
