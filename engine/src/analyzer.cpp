// SPDX-License-Identifier: GPL-2.0-or-later
// The connection table: finds or starts the iSCSI connection each segment belongs to.
#include "iscsi_doctor/analyzer.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>
#include <variant>
#include <vector>

#include "iscsi/detector.hpp"
#include "iscsi/pdu.hpp"
#include "session/constants.hpp"
#include "session/connection.hpp"
#include "session/relay.hpp"
#include "session/sessions.hpp"
#include "tcp/tracker.hpp"
#include "util/oldest_first.hpp"

namespace iscsi_doctor {

using session::Connection;

struct Analyzer::Impl {
  using Key = std::pair<Endpoint, Endpoint>;
  Impl(Options o, Sink& s) : options(std::move(o)), sink(s), budget(options.memory_budget) { relay.to = &sink; }

  bool is_target_port(uint16_t port) const {
    return std::find(options.ports.begin(), options.ports.end(), port) != options.ports.end();
  }

  // A Login Request (immediate bit set) at the start of a segment: iSCSI on any port.
  static bool looks_like_login(const Segment& seg) {
    if (seg.payload.size() < iscsi::kBhsLength || seg.payload[0] != 0x43) return false;
    auto bhs = iscsi::parse_bhs(seg.payload);
    return bhs && iscsi::plausible_bhs(*bhs, true);
  }

  // A connection joined mid-stream (no handshake) is judged once its round trips are known
  // (docs/rules.md "Joined connections"): its first segments are held while a scout (the same
  // analysis, its results discarded) measures them, then fed to the connection, seeded with the
  // round trips the scout measured and the digests its framing detected.
  struct Held {
    Segment seg;
    std::vector<uint8_t> payload;
    int dir;
  };
  struct Probation {
    Sink discard;
    session::SessionRegistry sessions;
    std::unique_ptr<Connection> scout;
    std::vector<Held> held;
    size_t bytes = 0;
  };
  std::map<Key, std::unique_ptr<Probation>> probation;
  size_t probation_bytes = 0;  // held by all of them

  bool probation_over(const Probation& p, int64_t now) const {
    const auto enough = [&](int d) {
      const auto& r = p.scout->rtt(d);
      return r.samples() >= session::probation_rtt_samples && r.clean_samples() > 0 && !r.upper_bound_only();
    };
    return (enough(0) && enough(1)) || p.held.size() >= session::probation_segments_max ||
           p.bytes >= session::probation_bytes_max ||
           now - p.held.front().seg.time_ns >= to_ns(session::probation_ms) ||
           probation_bytes > session::probation_bytes_all_max;
  }
  // Ends a connection's probation: the held segments go to it, what the scout found first.
  void end_probation(const Key& key, Connection& c) {
    auto p = probation.find(key);
    if (p == probation.end()) return;
    std::unique_ptr<Probation> pr = std::move(p->second);
    probation.erase(p);
    probation_bytes -= pr->bytes;
    for (int d = 0; d < 2; ++d) {
      if (pr->scout->rtt(d).known()) c.seed_rtt(d, pr->scout->rtt(d));
      c.seed_digests(d, pr->scout->header_digest_seen(d), pr->scout->data_digest_seen(d));
    }
    for (Held& h : pr->held) {
      h.seg.payload = std::span<const uint8_t>(h.payload.data(), h.payload.size());
      c.on_segment(h.seg, h.dir);
    }
  }
  // Closed, in its probation too (its scout saw the close; the connection has not yet).
  bool closed(const Key& key, const Connection& c) const {
    if (c.closed()) return true;
    auto p = probation.find(key);
    return p != probation.end() && p->second->scout->closed();
  }
  int64_t last_t(const Key& key, const Connection& c) const {
    auto p = probation.find(key);
    return p != probation.end() && !p->second->held.empty() ? p->second->held.back().seg.time_ns : c.last_t();
  }

  void finish_connection(const Key& key, Connection& c) {
    end_probation(key, c);
    c.finish();
    if (infos.size() < options.max_connections_listed) {
      infos.push_back(c.info());
      if (budget.on()) budget.hold(info_bytes(infos.back()));
      return;
    }
    if (!unlisted.connections)
      sink.on_notice({Notice::Level::info, 0, c.id(),
                      "connection listing cap (" + std::to_string(options.max_connections_listed) +
                          ") hit: later connections are analysed and their commands reported, but "
                          "counted rather than listed one by one"});
    unlisted.add(c.info());
  }

  // Memory follows what is open: a closed connection is finished once its last segments (final
  // ACK, a resent FIN) have had time to pass, and freed.
  struct Closing {
    int64_t due;
    Key key;
    uint32_t id;
  };
  std::deque<Closing> closing;
  void finish_closed(int64_t now) {
    while (!closing.empty() && closing.front().due < now) {
      Closing c = closing.front();
      closing.pop_front();
      auto it = live.find(c.key);
      if (it == live.end() || it->second->id() != c.id) {  // already replaced, or retired
        if (auto t = tombs.find(c.key); t != tombs.end() && t->second.id == c.id) end_tomb(t);
        continue;
      }
      finish_connection(it->first, *it->second);
      forget(it);
    }
  }
  // At the connection cap: connections idle past the timeout are finished and freed. Scanned at
  // most once per half timeout of capture time and once per as many segments as are open, so a
  // full table costs O(1) per segment whatever the timestamps say.
  int64_t last_idle_scan = INT64_MIN;
  uint64_t segments = 0, scan_segments = 0;
  void finish_idle(int64_t now) {
    const int64_t timeout = int64_t(options.idle_timeout_s * 1e9);
    if (last_idle_scan != INT64_MIN &&
        (now - last_idle_scan < timeout / 2 || segments - scan_segments < live.size()))
      return;
    last_idle_scan = now;
    scan_segments = segments;
    std::vector<std::pair<uint32_t, Key>> idle;
    for (auto& [key, conn] : live)
      if (now - last_t(key, *conn) >= timeout) idle.emplace_back(conn->id(), key);
    std::sort(idle.begin(), idle.end());
    for (auto& [id, key] : idle) {
      auto it = live.find(key);
      finish_connection(key, *it->second);
      forget(it);
    }
  }
  ConnectionTotals unlisted;
  uint64_t refused = 0;  // connections not analysed: the cap was full

  Options options;
  Tracer* tracer = nullptr;
  Sink& sink;
  std::map<Key, std::unique_ptr<Connection>> live;
  // The connection of the previous segment: most segments follow one of the same connection.
  using Live = std::map<Key, std::unique_ptr<Connection>>::iterator;
  bool last_valid = false;
  Live last;
  Live find_live(const Key& key) {
    if (last_valid && last->first == key) return last;
    return live.find(key);
  }
  void remember(Live it) {
    last = it;
    last_valid = true;
  }
  void forget(Live it) {
    if (last_valid && last == it) last_valid = false;
    budget.remove(it->second->budget_entry);
    by_id.erase(it->second->id());
    live.erase(it);
  }

  // The memory budget (session/memory_budget.hpp). After each segment: the connection's estimate,
  // and its retirement once nothing more can change its results (Connection::finished_at).
  session::MemoryBudget budget;
  size_t budget_peak = 0;
  Evictions evicted;
  struct Due {
    int64_t at;
    uint32_t id;
    Key key;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  std::priority_queue<Due, std::vector<Due>, std::greater<>> retiring;  // checks due by time (a FIN's wait)
  static Key key_of(const Connection& c) {
    const Endpoint &a = c.info_initiator(), &b = c.info_target();
    return a < b ? Key{a, b} : Key{b, a};
  }
  void after_segment(Live it, int64_t now) {
    Connection& c = *it->second;
    size_t bytes = c.memory_bytes();
    bool probing = false;
    if (!probation.empty())
      if (auto p = probation.find(it->first); p != probation.end()) {
        bytes += p->second->scout->memory_bytes() + p->second->bytes;
        probing = true;
      }
    using Class = session::MemoryBudget::Class;
    budget.update(&c, c.budget_entry, bytes, c.ending() ? Class::ending : c.busy() ? Class::busy : Class::idle);
    budget_peak = std::max(budget_peak, budget.used());
    if (!probing) {  // a joined connection keeps its linger: its last ACKs may time its path
      const int64_t at = c.finished_at();
      if (at <= now) {
        retire(it);
        return;
      }
      if (at != INT64_MAX && at != c.retire_due) {
        c.retire_due = at;
        retiring.push({at, c.id(), it->first});
      }
    }
    if (budget.short_of()) evict(&c);
  }
  void retire_due(int64_t now) {
    while (!retiring.empty() && retiring.top().at <= now) {
      const Due d = retiring.top();
      retiring.pop();
      auto it = live.find(d.key);
      if (it != live.end() && it->second->id() == d.id && it->second->finished_at() <= now &&
          !probation.count(d.key))
        retire(it);
    }
  }
  // Finished before its linger: its stray segments (a resent FIN, the final ACK again) are still
  // counted in its frames, while the linger would have lasted, as if it were open. Closed both ways
  // (its linger queued in `closing`), what its finish said besides its facts (a `serialized`
  // finding, notices) is said when the linger would have ended, so the report's order is the same.
  using Event = session::Event;
  using Relay = session::Relay;
  Relay relay;
  struct Tomb {
    uint32_t id;
    int64_t listed;  // index in infos; -1: counted in unlisted
    std::unique_ptr<std::vector<Event>> held;
    bool closed;      // both ways (else half-closed)
    Endpoint fin_by;  // the initiator if it sent a FIN or RST, else the target
    int64_t linger;
    uint32_t fin_seq, other_next;  // that FIN's (or RST's) sequence number; the other side's next
  };
  static constexpr size_t kTombBytes = 160;  // a map node with its key, malloc's header
  // The linger is over (or the 4-tuple starts anew, or the capture ends): what it held is said.
  void end_tomb(std::map<Key, Tomb>::iterator t) {
    if (t->second.held) relay.say(*t->second.held);
    budget.hold(-kTombBytes);
    tombs.erase(t);
  }
  static constexpr size_t kMaxTombs = 65536;
  std::map<Key, Tomb> tombs;  // at most kMaxTombs half-closed ones, closed ones for their linger
  // What half-closed ones said, past their linger: without a budget they would still be open, and
  // say it when the capture ends (at most kMaxTombs kept; beyond, said when the linger ends).
  std::multimap<Key, std::unique_ptr<std::vector<Event>>> parked;
  void park(std::map<Key, Tomb>::iterator t) {
    if (t->second.held && parked.size() < kMaxTombs) {
      parked.emplace(t->first, std::move(t->second.held));
      budget.hold(kTombBytes);
    }
    end_tomb(t);
  }
  // At the capture's end, in key order among the open ones: tombs and parked ones before `bound`.
  void say_retired_before(const Key* bound) {
    for (;;) {
      const bool tomb = !tombs.empty() && (!bound || tombs.begin()->first < *bound);
      const bool park = !parked.empty() && (!bound || parked.begin()->first < *bound);
      if (park && (!tomb || !(tombs.begin()->first < parked.begin()->first))) {
        relay.say(*parked.begin()->second);
        budget.hold(-kTombBytes);
        parked.erase(parked.begin());
      } else if (tomb) {
        end_tomb(tombs.begin());
      } else {
        return;
      }
    }
  }
  struct TombDue {
    int64_t until;
    uint32_t id;
    Key key;
  };
  std::deque<TombDue> tomb_order;
  void retire(Live it) {
    Connection& c = *it->second;
    const int64_t until = c.last_t() + c.linger_ns();
    const bool closed = c.closed();  // its linger is in `closing`: what it says waits for it
    std::vector<Event> held;
    relay.held = &held;  // half-closed, what it says waits for the capture's end (see `parked`)
    finish_connection(it->first, c);
    relay.held = nullptr;
    const int64_t listed = unlisted.connections ? -1 : int64_t(infos.size()) - 1;
    const bool initiator_fin = c.fin_seen(session::kI2T);
    const int fin_dir = initiator_fin ? session::kI2T : session::kT2I;
    Tomb t{c.id(), listed, nullptr, closed, initiator_fin ? c.info_initiator() : c.info_target(),
           c.linger_ns(), c.next_seq(fin_dir), c.next_seq(fin_dir ^ 1)};
    if (std::all_of(held.begin(), held.end(),
                    [](const Event& e) { return std::holds_alternative<ConnectionInfo>(e); }))
      relay.say(held);  // its facts alone: their order among other connections' is not reported
    else
      t.held = std::make_unique<std::vector<Event>>(std::move(held));
    if (auto old = tombs.find(it->first); old != tombs.end()) end_tomb(old);
    tombs.emplace(it->first, std::move(t));
    budget.hold(kTombBytes);
    if (!closed) tomb_order.push_back({until, c.id(), it->first});
    forget(it);
  }
  void expire_tombs(int64_t now) {
    while (!tomb_order.empty() && (tomb_order.front().until < now || tomb_order.size() > kMaxTombs)) {
      auto t = tombs.find(tomb_order.front().key);
      if (t != tombs.end() && t->second.id == tomb_order.front().id && !t->second.closed) {
        if (tomb_order.front().until < now)
          park(t);
        else
          end_tomb(t);
      }
      tomb_order.pop_front();
    }
  }
  void stray(std::map<Key, Tomb>::iterator it, const Segment& seg) {
    Tomb& t = it->second;
    if (t.listed >= 0)
      ++infos[size_t(t.listed)].frames;
    else
      ++unlisted.frames;
    // Half-closed, the other side's FIN or an RST closes it: without a budget it would be finished
    // after its linger from now, and say then what it held.
    if (!t.closed && ((seg.flags & tcp_flag::rst) || ((seg.flags & tcp_flag::fin) && seg.src != t.fin_by))) {
      t.closed = true;
      closing.push_back({seg.time_ns + t.linger, it->first, t.id});
    }
  }
  // Retired by the budget at its FIN or RST, then data past what a side had sent: its results
  // would have changed. The other side of a half-close may send it (RFC 9293 §3.6); after both FINs,
  // or from the side that sent its FIN, no peer does (a damaged capture); an RST out of the
  // receiver's window is ignored by it (RFC 5961 §3). The state is gone: the rest is analysed as a
  // connection joined mid-session, and a warning says so.
  bool not_its_end(const Tomb& t, const Segment& seg) {
    if (seg.payload_wire_len == 0) return false;
    const bool fin_side = seg.src == t.fin_by;
    if (int32_t(seg.seq + seg.payload_wire_len - (fin_side ? t.fin_seq : t.other_next)) <= 0) return false;
    sink.on_notice({Notice::Level::warning, seg.frame, t.id,
                    "new data came after the memory budget had finished this connection at its FIN or RST (a "
                    "half-close, a damaged capture or an RST its receiver ignored): its segments from here are "
                    "analysed as a new connection joined mid-session (--memory-budget 0 keeps it one "
                    "connection)"});
    return true;
  }
  // The budget is short: connections other than `keep` are finished, ended ones first, then idle,
  // then busy ones, each the least recently active of its kind.
  void evict(const Connection* keep) {
    using Class = session::MemoryBudget::Class;
    Class cls;
    while (budget.short_of()) {
      Connection* v = budget.victim(keep, cls);
      if (!v) return;
      auto it = live.find(key_of(*v));
      if (!evicted.connections)
        sink.on_notice({Notice::Level::warning, 0, v->id(),
                        "memory budget (" + mib(budget.limit()) +
                            " of analysis state) reached: connections are finished before their end to stay "
                            "within it, those that ended (FIN or RST) first, then idle ones, then busy ones"});
      ++evicted.connections;
      ++(cls == Class::ending ? evicted.ended : cls == Class::idle ? evicted.idle : evicted.busy);
      evicted.commands_open += v->open_commands();
      if (cls == Class::ending) {
        retire(it);
      } else {
        finish_connection(it->first, *v);
        forget(it);
      }
    }
  }
  // A listed connection's facts, kept to the end: the budget counts them too.
  static size_t info_bytes(const ConnectionInfo& i) {
    size_t n = sizeof(ConnectionInfo) + i.keys.capacity() * sizeof(i.keys[0]);
    for (const auto& [k, v] : i.keys) n += k.capacity() + v.capacity();
    return n;
  }
  static std::string mib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f MiB", double(bytes) / (1 << 20));
    return buf;
  }
  std::unordered_map<uint32_t, Connection*> by_id;  // the live connections by number
  template <typename V>
  using OldestFirst = util::OldestFirst<Key, V>;
  // Handshakes on ports not known to be iSCSI, kept until a Login Request shows the connection is
  // (then replayed into it: MSS, window scale and round trips come from them).
  static constexpr size_t kMaxPendingHandshakes = 4096;
  OldestFirst<std::vector<Segment>> pending;
  void remember_handshake(const Key& key, const Segment& seg, bool syn) {
    auto it = pending.entries.find(key);
    if (syn) {
      if (it == pending.entries.end()) it = pending.insert(key, kMaxPendingHandshakes);
      it->second.clear();
    } else if (it == pending.entries.end() || it->second.size() >= 3) {
      return;
    }
    Segment copy = seg;
    copy.payload = {};
    it->second.push_back(copy);
  }
  // Connections on ports not known to be iSCSI, joined mid-session (no SYN, no login), whose
  // first payload began with a plausible PDU header: held while their PDUs' structure is judged
  // (iscsi/detector.hpp), then replayed as iSCSI, or forgotten (docs/rules.md "Ports").
  struct Sniffed {
    iscsi::StreamDetector detector;
    Endpoint side0;  // the sender of the first payload
    std::deque<Held> held;  // the latest ones: the connection is analysed from the first kept
    size_t bytes = 0;
  };
  static constexpr size_t kMaxSniffed = 8, kMaxSniffedBytes = 2 << 20, kMaxNotIscsi = 65536;
  OldestFirst<std::unique_ptr<Sniffed>> sniffing;
  std::set<Key> not_iscsi;            // judged not iSCSI (forgotten when the set is full)
  std::map<Key, Endpoint> detected;   // judged iSCSI: its target, until its connection is made
  void give_up(const Key& key) {
    sniffing.entries.erase(key);
    if (not_iscsi.size() >= kMaxNotIscsi) not_iscsi.clear();
    not_iscsi.insert(key);
  }
  SegmentStatus sniff(Analyzer& a, const Key& key, const Segment& seg) {
    using Verdict = iscsi::StreamDetector::Verdict;
    auto sn = sniffing.entries.find(key);
    if (sn == sniffing.entries.end()) {
      if (not_iscsi.count(key) || !iscsi::StreamDetector::starts_with_header(seg.payload))
        return SegmentStatus::ignored;
      sn = sniffing.insert(key, kMaxSniffed);
      sn->second = std::make_unique<Sniffed>();
      sn->second->side0 = seg.src;
    }
    Sniffed& s = *sn->second;
    s.held.push_back({seg, std::vector<uint8_t>(seg.payload.begin(), seg.payload.end()), 0});
    s.held.back().seg.payload = {};
    s.bytes += seg.payload.size() + session::probation_segment_cost;
    while (s.bytes > kMaxSniffedBytes && s.held.size() > 1) {
      s.bytes -= s.held.front().payload.size() + session::probation_segment_cost;
      s.held.pop_front();
    }
    const Verdict v = s.detector.feed(seg.src == s.side0 ? 0 : 1, seg.payload);
    if (v == Verdict::not_iscsi) {
      give_up(key);
      return SegmentStatus::ignored;
    }
    if (v == Verdict::undecided) return SegmentStatus::ignored;
    const Endpoint other = key.first == s.side0 ? key.second : key.first;
    const Endpoint target = s.detector.initiator_side() == 0 ? other : s.side0;
    detected[key] = target;
    std::unique_ptr<Sniffed> found = std::move(sn->second);
    sniffing.entries.erase(sn);
    sink.on_notice({Notice::Level::info, found->held.front().seg.frame, 0,
                    "iSCSI found on port " + std::to_string(target.port) + " (target " + target.str() +
                        ") without its login: the PDUs chain by their lengths and commands are answered "
                        "by their task tags; analysed from frame " +
                        std::to_string(found->held.front().seg.frame)});
    SegmentStatus status = SegmentStatus::ignored;
    for (Held& h : found->held) {
      h.seg.payload = std::span<const uint8_t>(h.payload.data(), h.payload.size());
      status = a.feed(h.seg);
    }
    return status;
  }

  std::vector<ConnectionInfo> infos;  // finished connections
  session::SessionRegistry sessions;
  uint32_t next_id = 1;
  bool cap_reported = false;
  static constexpr size_t kMaxRefusedKept = 65536;
  std::set<Key> refused_keys;  // refused by the cap since their SYN (or first segment)
};

Analyzer::Analyzer(Options options, Sink& sink) : impl_(std::make_unique<Impl>(std::move(options), sink)) {}
Analyzer::~Analyzer() = default;

void Analyzer::set_tracer(Tracer* tracer) { impl_->tracer = tracer; }

SegmentStatus Analyzer::feed(const Segment& seg) {
  Impl& m = *impl_;
  Impl::Key key = seg.src < seg.dst ? Impl::Key{seg.src, seg.dst} : Impl::Key{seg.dst, seg.src};
  ++m.segments;
  if (!m.closing.empty()) m.finish_closed(seg.time_ns);
  if (!m.retiring.empty()) m.retire_due(seg.time_ns);
  if (!m.tomb_order.empty()) m.expire_tombs(seg.time_ns);
  auto it = m.find_live(key);
  bool syn = (seg.flags & tcp_flag::syn) && !(seg.flags & tcp_flag::ack);
  // A SYN-ACK after the close answers a SYN the capture missed (RFC 9293 §3.5): a new connection
  // (not one with a FIN or RST too: no peer sends that).
  const bool opens = syn || (seg.flags & (tcp_flag::syn | tcp_flag::fin | tcp_flag::rst)) == tcp_flag::syn;
  if (it != m.live.end() && opens && m.closed(key, *it->second)) {
    // The 4-tuple is reused by a new connection.
    m.finish_connection(key, *it->second);
    m.forget(it);
    it = m.live.end();
  }
  if (it == m.live.end() && !m.tombs.empty()) {
    if (auto t = m.tombs.find(key); t != m.tombs.end()) {
      if (!syn && !(opens && t->second.closed) && !m.not_its_end(t->second, seg)) {
        m.stray(t, seg);
        return SegmentStatus::ignored;
      }
      m.end_tomb(t);
    }
  }
  if (it == m.live.end()) {
    const bool known_port = m.is_target_port(seg.dst.port) || m.is_target_port(seg.src.port);
    if (!known_port && m.options.detect_ports && seg.payload_wire_len == 0 &&
        (seg.flags & (tcp_flag::syn | tcp_flag::ack)))
      m.remember_handshake(key, seg, syn);
    // A connection whose PDUs are being judged keeps every segment (its ACKs time its path).
    if (!known_port && !syn && !m.sniffing.entries.empty() && m.sniffing.entries.count(key))
      return m.sniff(*this, key, seg);
    if (!syn && seg.payload_wire_len == 0) return SegmentStatus::ignored;  // stray ACKs, FINs
    // A connection the cap refused stays unanalysed until its 4-tuple starts anew (SYN): joined
    // later, mid-stream, it would be judged on half its evidence.
    if (!m.refused_keys.empty() && m.refused_keys.count(key)) {
      if (!syn) return SegmentStatus::ignored;
      m.refused_keys.erase(key);
    }
    const Endpoint *initiator = nullptr, *target = nullptr;
    if (m.is_target_port(seg.dst.port))
      initiator = &seg.src, target = &seg.dst;
    else if (m.is_target_port(seg.src.port))
      initiator = &seg.dst, target = &seg.src;
    else if (m.options.detect_ports && !syn && Impl::looks_like_login(seg))
      initiator = &seg.src, target = &seg.dst;
    else if (auto d = m.detected.find(key); d != m.detected.end()) {
      const bool from_target = seg.src == d->second;
      initiator = from_target ? &seg.dst : &seg.src;
      target = from_target ? &seg.src : &seg.dst;
    }
    if (!initiator) {
      if (!known_port && m.options.detect_ports && !syn && !seg.payload.empty()) return m.sniff(*this, key, seg);
      return SegmentStatus::ignored;
    }
    if (m.live.size() >= m.options.max_connections) m.finish_idle(seg.time_ns);
    if (m.live.size() >= m.options.max_connections) {
      if (!m.cap_reported)
        m.sink.on_notice({Notice::Level::error, seg.frame, 0,
                          "connection cap (" + std::to_string(m.options.max_connections) +
                              ") hit: further connections are not analysed while that many are open"});
      m.cap_reported = true;
      if (m.refused_keys.size() >= Impl::kMaxRefusedKept) m.refused_keys.clear();
      m.refused_keys.insert(key);
      ++m.refused;
      return SegmentStatus::ignored;
    }
    if (!m.detected.empty()) m.detected.erase(key);
    auto conn = std::make_unique<Connection>(m.next_id++, *initiator, *target, m.options, m.relay, m.sessions);
    conn->set_tracer(m.tracer);  // not the scout's: its findings are a first look, replayed later
    it = m.live.emplace(key, std::move(conn)).first;
    m.by_id[it->second->id()] = it->second.get();
    if (auto p = m.pending.entries.find(key); p != m.pending.entries.end()) {
      for (const Segment& h : p->second)
        it->second->on_segment(h, h.src == *initiator ? session::kI2T : session::kT2I);
      m.pending.entries.erase(p);
    } else if (!syn && m.probation.size() < session::probation_connections_max) {
      auto pr = std::make_unique<Impl::Probation>();
      pr->scout = std::make_unique<Connection>(it->second->id(), *initiator, *target, m.options, pr->discard,
                                               pr->sessions);
      m.probation.emplace(key, std::move(pr));
    }
  }
  m.remember(it);
  Connection& c = *it->second;
  int dir = seg.src == c.info_initiator() ? session::kI2T : session::kT2I;
  if (!m.probation.empty()) {
    if (auto p = m.probation.find(key); p != m.probation.end()) {
      Impl::Probation& pr = *p->second;
      const bool was_closed = pr.scout->closed();
      const SegmentStatus status = pr.scout->on_segment(seg, dir);
      // Closed, it is finished (and its probation ended) after the linger: the final ACK of the
      // FIN may be the first round-trip sample free of the peer's answer time.
      if (!was_closed && pr.scout->closed()) m.closing.push_back({seg.time_ns + pr.scout->linger_ns(), key, c.id()});
      pr.held.push_back({seg, std::vector<uint8_t>(seg.payload.begin(), seg.payload.end()), dir});
      const size_t cost = seg.payload.size() + session::probation_segment_cost;
      pr.bytes += cost;
      m.probation_bytes += cost;
      if (m.probation_over(pr, seg.time_ns)) m.end_probation(key, c);
      if (m.budget.on()) m.after_segment(it, seg.time_ns);
      return status;
    }
  }
  const bool was_closed = c.closed();
  SegmentStatus status = c.on_segment(seg, dir);
  if (!was_closed && c.closed()) m.closing.push_back({seg.time_ns + c.linger_ns(), key, c.id()});
  if (m.budget.on()) m.after_segment(it, seg.time_ns);
  return status;
}

void Analyzer::finish() {
  Impl& m = *impl_;
  // In key order, with the retired ones whose linger was not over (as if they were still open).
  for (auto& [key, conn] : m.live) {
    m.say_retired_before(&key);
    m.finish_connection(key, *conn);
  }
  m.say_retired_before(nullptr);
  m.live.clear();
  m.by_id.clear();
  m.last_valid = false;
  m.closing.clear();
  m.budget = session::MemoryBudget(m.options.memory_budget);
  m.retiring = {};
  m.tomb_order.clear();
  if (const Evictions& e = m.evicted; e.connections)
    m.sink.on_notice({Notice::Level::warning, 0, 0,
                      std::to_string(e.connections) + (e.connections == 1 ? " connection" : " connections") +
                          " finished early by the memory budget (" + Impl::mib(m.budget.limit()) + "): " +
                          std::to_string(e.ended) + " ended (FIN or RST) before their linger was over, " +
                          std::to_string(e.idle) + " idle, " + std::to_string(e.busy) + " busy (" +
                          std::to_string(e.commands_open) +
                          " commands open, reported never answered); a later segment of an idle or busy one "
                          "starts it anew, joined mid-session"});
  if (m.refused)
    m.sink.on_notice({Notice::Level::error, 0, 0,
                      std::to_string(m.refused) + (m.refused == 1 ? " connection" : " connections") +
                          " not analysed: the connection cap (" + std::to_string(m.options.max_connections) +
                          ") was full when it began"});
}

std::vector<ConnectionInfo> Analyzer::connections() const {
  std::vector<ConnectionInfo> out = impl_->infos;
  for (auto& [key, conn] : impl_->live)
    out.push_back(conn->info());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

const ConnectionTotals& Analyzer::unlisted_connections() const { return impl_->unlisted; }

std::vector<SessionInfo> Analyzer::sessions() const { return impl_->sessions.all(); }

const Evictions& Analyzer::evictions() const { return impl_->evicted; }

size_t Analyzer::memory_peak() const { return impl_->budget_peak; }

bool Analyzer::endpoints(uint32_t connection, Endpoint& initiator, Endpoint& target) const {
  const auto it = impl_->by_id.find(connection);
  if (it == impl_->by_id.end()) return false;
  initiator = it->second->info_initiator();
  target = it->second->info_target();
  return true;
}

}  // namespace iscsi_doctor
