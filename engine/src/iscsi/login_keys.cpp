// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/login_keys.hpp"

#include <algorithm>

namespace iscsi_doctor::iscsi {
namespace {

constexpr size_t kMaxKeyLength = 63;      // §6.1
constexpr size_t kMaxValueLength = 8192;  // §6.1: the largest value any key allows

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '+' || c == '@' || c == '_';
}

bool valid_key(std::string_view k) {
  return !k.empty() && k.size() <= kMaxKeyLength && std::all_of(k.begin(), k.end(), key_char);
}

// Answers that leave a key at its previous value (§6.2).
bool is_non_value(std::string_view v) { return v == "NotUnderstood" || v == "Irrelevant" || v == "Reject"; }

std::optional<bool> parse_bool(std::string_view v) {
  if (v == "Yes") return true;
  if (v == "No") return false;
  return std::nullopt;
}

std::optional<Digest> parse_digest(std::string_view v) {
  if (v == "None") return Digest::None;
  if (v == "CRC32C") return Digest::CRC32C;
  return std::nullopt;
}

bool in_list(std::string_view list, std::string_view v) {
  while (true) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == v) return true;
    if (comma == std::string_view::npos) return false;
    list.remove_prefix(comma + 1);
  }
}

enum class Kind : uint8_t { bool_and, bool_or, num_min, num_max, digest_list };
struct KeyRule {
  std::string_view name;
  Kind kind;
  uint64_t lo, hi;  // valid range for numbers
};
constexpr KeyRule kRules[] = {
    {"HeaderDigest", Kind::digest_list, 0, 0},
    {"DataDigest", Kind::digest_list, 0, 0},
    {"MaxConnections", Kind::num_min, 1, 65535},
    {"InitialR2T", Kind::bool_or, 0, 0},
    {"ImmediateData", Kind::bool_and, 0, 0},
    {"MaxBurstLength", Kind::num_min, 512, 16777215},
    {"FirstBurstLength", Kind::num_min, 512, 16777215},
    {"DefaultTime2Wait", Kind::num_max, 0, 3600},
    {"DefaultTime2Retain", Kind::num_min, 0, 3600},
    {"MaxOutstandingR2T", Kind::num_min, 1, 65535},
    {"DataPDUInOrder", Kind::bool_or, 0, 0},
    {"DataSequenceInOrder", Kind::bool_or, 0, 0},
    {"ErrorRecoveryLevel", Kind::num_min, 0, 2},
};

const KeyRule* rule_for(std::string_view key) {
  for (const auto& r : kRules)
    if (r.name == key) return &r;
  return nullptr;
}

std::optional<uint64_t> in_range(const std::optional<std::string>& v, const KeyRule& r) {
  if (!v) return std::nullopt;
  const auto n = parse_number(*v);
  if (!n || *n < r.lo || *n > r.hi) return std::nullopt;
  return n;
}

}  // namespace

std::optional<uint64_t> parse_number(std::string_view v) {
  if (v.empty()) return std::nullopt;
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    base = 16;
    v.remove_prefix(2);
  }
  uint64_t n = 0;
  for (char c : v) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    if (n > (UINT64_MAX - uint64_t(d)) / uint64_t(base)) return std::nullopt;
    n = n * uint64_t(base) + uint64_t(d);
  }
  return n;
}

std::vector<TextKey> parse_text_keys(std::span<const uint8_t> text) {
  std::vector<TextKey> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = i;
    while (end < text.size() && text[end] != 0)
      ++end;
    const std::string_view item(reinterpret_cast<const char*>(text.data() + i), end - i);
    i = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;  // garbage or padding
    const std::string_view key = item.substr(0, eq);
    if (!valid_key(key)) continue;
    out.push_back(TextKey{std::string(key), std::string(item.substr(eq + 1, kMaxValueLength))});
  }
  return out;
}

void Negotiation::add_pdu(const Bhs& bhs, std::span<const uint8_t> data, bool data_truncated) {
  const Opcode op = bhs.op();
  const bool login = op == Opcode::LoginRequest || op == Opcode::LoginResponse;
  const bool text = op == Opcode::TextRequest || op == Opcode::TextResponse;
  if (!login && !text) return;
  const Side side = is_initiator_opcode(bhs.opcode) ? Side::initiator : Side::target;
  const int s = int(side);

  std::string& pending = pending_[s];
  const size_t room = kMaxPendingText - std::min(kMaxPendingText, pending.size());
  pending.append(reinterpret_cast<const char*>(data.data()), std::min(room, data.size()));
  if (data_truncated || data.size() > room) pending_truncated_[s] = true;
  if (data.size() > room) result_.text_bytes_clipped += data.size() - room;

  // C = 1: the text continues in the next PDU of this direction (§11.10.2, §11.12.5).
  if (!bhs.continue_bit()) {
    auto keys = parse_text_keys(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(pending.data()), pending.size()));
    // A clipped text may end in a cut value: drop the last pair rather than trust it.
    if (pending_truncated_[s] && !keys.empty()) keys.pop_back();
    for (const auto& kv : keys)
      apply(kv.key, kv.value, side, login);
    pending.clear();
    pending_truncated_[s] = false;
  }

  if (op == Opcode::LoginResponse) {
    result_.status_class = bhs.status_class();
    result_.status_detail = bhs.status_detail();
    if (bhs.status_class() != 0) result_.failed = true;
    // Final response: T = 1 with NSG = 3 (Full Feature Phase) and success (§11.13).
    if (bhs.status_class() == 0 && bhs.transit() && bhs.nsg() == 3 && !bhs.continue_bit())
      result_.complete = true;
  }
  recompute();
}

void Negotiation::apply(const std::string& key, const std::string& value, Side side, bool in_login) {
  if (keys_counted_ < kMaxKeysSeen) {
    ++keys_counted_;
    if (list_keys_) result_.keys_seen.push_back(KeySeen{key, value, side == Side::initiator, in_login});
  } else {
    ++result_.keys_not_listed;
  }
  if (is_non_value(value)) {
    // An answer that declines: the round ends with the default/previous value.
    if (auto it = exchanges_.find(key); it != exchanges_.end() && side != it->second.offerer)
      (side == Side::initiator ? it->second.initiator : it->second.target) = value;
    return;
  }

  auto declare = [&](Setting<std::string>& s) {
    s.value = value;
    s.seen = true;
  };
  const bool ini = side == Side::initiator;
  // Declarative keys (§13.4-§13.9, §13.12, §13.21): the sender states a fact about itself.
  if (key == "MaxRecvDataSegmentLength") {
    if (const auto n = parse_number(value); n && *n >= 512 && *n <= 16777215) {
      auto& s = ini ? result_.initiator_max_recv_data_segment : result_.target_max_recv_data_segment;
      s.value = uint32_t(*n);
      s.seen = true;
    }
    return;
  }
  if (in_login) {  // SendTargets answers in Text PDUs also use these names; they describe other targets
    if (key == "InitiatorName" && ini) return declare(result_.initiator_name);
    if (key == "TargetName" && ini) return declare(result_.target_name);
    if (key == "SessionType" && ini) return declare(result_.session_type);
    if (key == "InitiatorAlias" && ini) return declare(result_.initiator_alias);
    if (key == "TargetAlias" && !ini) return declare(result_.target_alias);
    if (key == "TargetAddress" && !ini) return declare(result_.target_address);
    if (key == "TargetPortalGroupTag" && !ini) return declare(result_.target_portal_group_tag);
  }
  if (!rule_for(key)) return;

  Exchange& ex = exchanges_[key];
  const auto& other = ini ? ex.target : ex.initiator;
  if (!ex.initiator && !ex.target) {
    ex.offerer = side;
  } else if (side == ex.offerer && other) {
    ex = Exchange{};  // the offerer speaks again after an answer: a new round (renegotiation)
    ex.offerer = side;
  }
  (ini ? ex.initiator : ex.target) = value;
}

void Negotiation::recompute() {
  Negotiated& r = result_;
  for (const auto& [key, ex] : exchanges_) {
    const KeyRule* rule = rule_for(key);
    if (!rule) continue;
    const auto& offer = ex.offerer == Side::initiator ? ex.initiator : ex.target;
    const auto& answer = ex.offerer == Side::initiator ? ex.target : ex.initiator;
    if (answer && is_non_value(*answer)) continue;  // declined: default stays

    switch (rule->kind) {
      case Kind::bool_and:
      case Kind::bool_or: {
        auto& s = key == "InitialR2T"       ? r.initial_r2t
                  : key == "ImmediateData"  ? r.immediate_data
                  : key == "DataPDUInOrder" ? r.data_pdu_in_order
                                            : r.data_sequence_in_order;
        const auto o = offer ? parse_bool(*offer) : std::nullopt;
        const auto a = answer ? parse_bool(*answer) : std::nullopt;
        const bool is_and = rule->kind == Kind::bool_and;
        if (o && a) {
          s = {is_and ? (*o && *a) : (*o || *a), true};
        } else if (o && *o == !is_and) {
          // AND with No / OR with Yes decides alone; the answer is optional (§6.2.2).
          s = {*o, true};
        }
        break;
      }
      case Kind::num_min:
      case Kind::num_max: {
        const auto o = in_range(offer, *rule), a = in_range(answer, *rule);
        if (!o || !a) break;  // no valid answer yet: not settled
        const uint32_t v = uint32_t(rule->kind == Kind::num_min ? std::min(*o, *a) : std::max(*o, *a));
        Setting<uint32_t>* s = key == "MaxConnections"       ? &r.max_connections
                               : key == "MaxBurstLength"     ? &r.max_burst_length
                               : key == "FirstBurstLength"   ? &r.first_burst_length
                               : key == "DefaultTime2Wait"   ? &r.default_time2wait
                               : key == "DefaultTime2Retain" ? &r.default_time2retain
                               : key == "MaxOutstandingR2T"  ? &r.max_outstanding_r2t
                                                             : &r.error_recovery_level;
        *s = {v, true};
        break;
      }
      case Kind::digest_list: {
        // The answer picks one value from the offered list (§6.2.1).
        auto& s = key == "HeaderDigest" ? r.header_digest : r.data_digest;
        if (!offer || !answer) break;
        const auto a = parse_digest(*answer);
        if (a && in_list(*offer, *answer)) s = {*a, true};
        break;
      }
    }
  }
}

FramerConfig Negotiation::framer_config() const {
  FramerConfig c;
  c.digests_known = result_.complete;
  c.header_digest = result_.header_digest.value == Digest::CRC32C;
  c.data_digest = result_.data_digest.value == Digest::CRC32C;
  return c;
}

}  // namespace iscsi_doctor::iscsi
