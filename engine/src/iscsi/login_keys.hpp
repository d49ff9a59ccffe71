// SPDX-License-Identifier: GPL-2.0-or-later
// iSCSI text keys (RFC 7143 §6 "Text Mode Negotiation", §13 "Login/Text Operational Text Keys").
//
// parse_text_keys: "key=value\0key=value\0..." from untrusted bytes. Items without '=', with an
// empty or over-long key (> 63 bytes, §6.1) or with characters outside the key alphabet are
// ignored; a missing final NUL is tolerated; values are kept as sent (clipped to 8192 bytes).
//
// Negotiation: one per connection. Feed it every Login/Text PDU's header and data segment in
// capture order (both directions); text split over several PDUs with the C bit is joined first
// (§11.10.2, §11.12.5). It records who offered each key and the other side's answer, and yields
// the operational values in effect, applying the result functions of §6.2.2 (Boolean AND/OR,
// numerical min/max) and treating NotUnderstood/Irrelevant/Reject answers as "no change".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "iscsi/framer.hpp"
#include "iscsi/pdu.hpp"

namespace iscsi_doctor::iscsi {

inline constexpr size_t kMaxPendingText = 262144;  // a C-bit sequence longer than this is clipped
inline constexpr size_t kMaxKeysSeen = 4096;       // Negotiated::keys_seen entries

struct TextKey {
  std::string key, value;
  friend bool operator==(const TextKey&, const TextKey&) = default;
};

std::vector<TextKey> parse_text_keys(std::span<const uint8_t> text);

// Numerical value per §6.1 (decimal, or 0x-prefixed hex); nullopt when malformed or > 2^64-1.
std::optional<uint64_t> parse_number(std::string_view v);

enum class Digest : uint8_t { None, CRC32C };

template <class T>
struct Setting {
  T value{};
  bool seen = false;  // false: the RFC default (or the negotiation did not settle it)
};

struct KeySeen {
  std::string key, value;
  bool from_initiator = false;
  bool in_login = false;  // Login PDU (else Text)
};

struct Negotiated {
  Setting<Digest> header_digest{Digest::None}, data_digest{Digest::None};
  // Declarative, each side about what it receives (§13.12): the initiator's value limits the
  // target's Data-In/Text/... data segments, the target's value the initiator's Data-Out etc.
  Setting<uint32_t> initiator_max_recv_data_segment{8192}, target_max_recv_data_segment{8192};
  Setting<uint32_t> first_burst_length{65536};  // min (§13.14)
  Setting<uint32_t> max_burst_length{262144};   // min (§13.13)
  Setting<uint32_t> max_outstanding_r2t{1};     // min (§13.17)
  Setting<uint32_t> max_connections{1};         // min (§13.2)
  Setting<uint32_t> default_time2wait{2};       // max (§13.15)
  Setting<uint32_t> default_time2retain{20};    // min (§13.16)
  Setting<uint32_t> error_recovery_level{0};    // min (§13.20)
  Setting<bool> initial_r2t{true};              // OR  (§13.10)
  Setting<bool> immediate_data{true};           // AND (§13.11)
  Setting<bool> data_pdu_in_order{true};        // OR  (§13.18)
  Setting<bool> data_sequence_in_order{true};   // OR  (§13.19)
  Setting<std::string> session_type{"Normal"};  // declarative, initiator (§13.21)
  Setting<std::string> initiator_name, target_name, initiator_alias, target_alias;
  Setting<std::string> target_address, target_portal_group_tag;

  std::vector<KeySeen> keys_seen;   // every key=value in order (capped at kMaxKeysSeen entries)
  uint64_t keys_not_listed = 0;     // applied but beyond the keys_seen cap
  uint64_t text_bytes_clipped = 0;  // text beyond kMaxPendingText, dropped with the key it cut
  bool complete = false;            // final Login Response: T=1, NSG=Full Feature Phase, status 0 (§11.13)
  bool failed = false;              // a Login Response with a non-zero status class
  uint8_t status_class = 0, status_detail = 0;  // from the last Login Response
};

class Negotiation {
public:
  // Login Request/Response or Text Request/Response; other opcodes are ignored. `data` is the
  // PDU's data segment as kept by the framer (may be a prefix: data_truncated).
  void add_pdu(const Bhs& bhs, std::span<const uint8_t> data, bool data_truncated = false);
  const Negotiated& result() const { return result_; }
  // Off: keys_seen stays empty (a connection needs only the values; memory), the cap still counted.
  void list_keys(bool on) { list_keys_ = on; }
  // Framer settings for Full Feature Phase; digests_known once the login completed.
  FramerConfig framer_config() const;
  // Heap bytes held, estimated (the memory budget: session/memory_budget.hpp).
  size_t memory_bytes() const {
    constexpr size_t kNode = 160;  // a map node: two strings' headers, the exchange, malloc's own
    size_t n = pending_[0].capacity() + pending_[1].capacity() + exchanges_.size() * kNode +
               result_.keys_seen.capacity() * sizeof(KeySeen);
    for (const KeySeen& k : result_.keys_seen) n += k.key.size() + k.value.size();
    return n;
  }

private:
  enum class Side : uint8_t { initiator, target };
  struct Exchange {  // latest offer/answer round of one negotiated key
    std::optional<std::string> initiator, target;
    Side offerer = Side::initiator;
  };
  void apply(const std::string& key, const std::string& value, Side side, bool in_login);
  void recompute();

  std::string pending_[2];  // text of a C-bit sequence, per direction
  bool pending_truncated_[2] = {false, false};
  std::map<std::string, Exchange, std::less<>> exchanges_;
  Negotiated result_;
  bool list_keys_ = true;
  size_t keys_counted_ = 0;
};

}  // namespace iscsi_doctor::iscsi
