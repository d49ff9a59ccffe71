// SPDX-License-Identifier: GPL-2.0-or-later
// One iSCSI connection (one TCP connection): both byte streams, PDU framing, login keys, the
// open commands and their critical paths; it hands what it sees to the rules (rules/rules.hpp),
// which explain each command's latency (docs/rules.md, docs/architecture.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "iscsi/login_keys.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "rules/rules.hpp"
#include "rules/view.hpp"
#include "session/constants.hpp"
#include "session/command.hpp"
#include "session/command_table.hpp"
#include "session/keys.hpp"
#include "session/memory_budget.hpp"
#include "session/pdu_stream.hpp"
#include "session/sessions.hpp"
#include "session/task_management.hpp"
#include "tcp/flow.hpp"
#include "tcp/tracker.hpp"
#include "util/fifo.hpp"

namespace iscsi_doctor::session {

class Connection final : private tcp::Receiver, private rules::FindingOut {
public:
  Connection(uint32_t id, const Endpoint& initiator, const Endpoint& target, const Options& options,
             Sink& sink, SessionRegistry& sessions);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  SegmentStatus on_segment(const Segment& seg, int dir);
  // End of capture (or of the connection): open commands are reported incomplete.
  void finish();

  ConnectionInfo info() const;
  Vantage vantage_now() const;             // from the round trips so far (info().vantage)
  double initiator_offset_now_ms() const;  // CommandResult::initiator_offset_ms
  const std::string& initiator_name() const { return initiator_name_; }
  const std::string& target_name() const { return target_name_; }
  const std::string& session_type() const { return session_type_; }
  const std::string& isid() const { return isid_; }
  uint16_t tsih() const { return tsih_; }
  uint32_t id() const { return id_; }
  const Endpoint& info_initiator() const { return initiator_; }
  const Endpoint& info_target() const { return target_; }
  bool closed() const { return tcp_.closed(); }
  int64_t last_t() const { return last_t_; }  // capture time of its latest segment
  // What a first look at a joined connection found (Analyzer), given before its first segment:
  // the round trips, and the digests the framing of a stream joined mid-way would probe for.
  // The round trips a scout measured on the same segments, with their spread (Analyzer).
  void seed_rtt(int side_dir, const tcp::RttEstimate& scout) { tcp_.seed_rtt(side_dir, scout); }
  void seed_digests(int dir, std::optional<bool> header, std::optional<bool> data) {
    digest_seed_[dir] = {header, data};
  }
  const tcp::RttEstimate& rtt(int side_dir) const { return tcp_.rtt(side_dir); }
  std::optional<bool> header_digest_seen(int dir) const { return pdus_[dir].header_digest(); }
  std::optional<bool> data_digest_seen(int dir) const { return pdus_[dir].data_digest(); }
  // How long after closing its last segments may still pass (final ACK, resent FIN).
  int64_t linger_ns() const {
    return std::max<int64_t>(to_ns(closed_linger_ms), closed_linger_rtts * full_rtt_ns());
  }
  bool login_done() const { return login_done_; }
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }

  // For the memory budget (session/memory_budget.hpp; connection_memory.cpp): the bytes it holds,
  // estimated; whether a command is open or answered but not yet reported; and from when (capture
  // time) nothing more can change its results: every command reported, nothing held, and both FINs
  // acknowledged, an RST, or a FIN a few round trips ago (INT64_MAX: not, or not yet).
  size_t memory_bytes() const;
  bool busy() const { return slots_.open_count() > 0 || !settling_.empty(); }
  bool ending() const { return tcp_.ending(); }
  bool fin_seen(int dir) const { return tcp_.flow(dir).fin_seen; }
  // The next sequence number of a side's data in order (after its FIN: the FIN's).
  uint32_t next_seq(int dir) const { return uint32_t(tcp_.flow(dir).next); }
  size_t open_commands() const { return slots_.open_count(); }
  int64_t finished_at() const;
  MemoryBudget::Entry budget_entry;  // the Analyzer's budget keeps it
  int64_t retire_due = INT64_MAX;    // the Analyzer's latest check queued for it

private:
  struct PathEvent {
    uint32_t slot = 0;
    enum class Role : uint8_t { start, cont, reply, solicited } role = Role::cont;
    bool response = false;  // the event begins a SCSI Response
  };
  using HoldVerdict = rules::HoldVerdict;

  // TCP: what the tracker says the streams carry (tcp::Receiver)
  void stream_from_syn(int dir) override;
  void stream_without_syn(int dir, const Segment& seg) override;
  tcp::Delivery deliver(int dir, std::span<const uint8_t> bytes, uint32_t wire_len, const Segment& seg,
                           const Segment* filled_by) override;
  void hole_filled(int dir, const Segment& seg, int64_t since) override;  // to rules::Retransmission
  void resent(int dir, const Segment& seg, const tcp::SentSegment* original) override;  // the same
  void lost(int dir, uint64_t bytes, uint64_t frame, const char* why) override;
  void unacked_cap_hit(int dir, uint64_t frame, size_t cap) override;
  const Segment* filling_ = nullptr;  // while held bytes are delivered: the segment that filled the hole
  int32_t seg_h_ = -1;                // half trips its command reached with the segment being delivered
  uint64_t seg_cmd_ = 0;              // that command's first frame
  uint32_t seg_itt_ = 0;
  static bool starts_with_login(const Segment& seg, int dir);
  int64_t rtt_ns(int side_dir) const { return tcp_.rtt_ns(side_dir); }  // capture point <-> that side
  int64_t full_rtt_ns() const { return tcp_.full_rtt_ns(); }
  // What the rules may see of this connection (rules/view.hpp).
  rules::ConnectionView view() const { return {id_, tcp_, options_, tracer_}; }

  // iSCSI
  void on_pdus(int dir, const Segment& seg, std::vector<PduEvent>& events, bool began_mid_pdu,
               uint32_t mid_pdu_slot);
  uint32_t path_event_for_start(int dir, const PduEvent& ev, const Segment& seg, PathEvent::Role& role);
  void analyse_path_event(int dir, const Segment& seg, const PathEvent& event, HoldVerdict& verdict);
  void on_pdu_end(int dir, const Segment& seg, const PduEvent& ev);
  void on_login(int dir, const PduEvent& ev, const Segment& seg);
  void replay_orphans(uint32_t itt);
  void late_reply_events(uint32_t slot, const Segment& seg, const PduEvent& ev);
  void complete(uint32_t slot, const Segment& seg, const PduEvent& ev);
  void settle(int64_t now, bool all = false);
  void emit_command(OpenCommand& c);
  uint32_t in_flight_with(const OpenCommand& c) const;
  // The rules' findings (rules::FindingOut): a finding of this connection, tied to command c when
  // there is one; given to the Sink with what its verdict inferred; a notice within the budget.
  Finding finding(FindingKind kind, Side side, uint64_t frame, double lost_ms, const OpenCommand* c) override;
  void emit_finding(Finding f) override;
  void notice(Notice::Level level, uint64_t frame, std::string message) override;
  // A buffer cap was hit: said once per connection and cap, whatever the notice budget.
  void cap_notice(uint8_t cap, uint64_t frame, std::string message,
                  Notice::Level level = Notice::Level::warning);
  uint32_t session_id() const;  // resolved on first use: after login when there is one
  void retire(uint32_t slot);
  void release_slot(uint32_t slot);

  uint32_t id_;
  mutable uint32_t session_ = 0;
  SessionRegistry& sessions_;
  Endpoint initiator_, target_;
  const Options& options_;
  Sink& sink_;
  Tracer* tracer_ = nullptr;
  uint64_t trace_first_[2] = {0, 0};  // first frame of the PDU in progress (for the tracer)

  tcp::Tracker tcp_;
  PduStream pdus_[2];
  int64_t last_t_ = 0;
  bool mid_session_ = false;
  rules::Rules rules_;  // the findings' rules, with their own state
  std::pair<std::optional<bool>, std::optional<bool>> digest_seed_[2];

  OperationalKeys keys_;
  iscsi::Negotiation login_;
  bool login_done_ = false, saw_login_ = false;
  bool login_cut_ = false;  // a Login/Text PDU's text was cut short (snaplen)
  std::string initiator_name_, target_name_, session_type_, isid_;
  uint16_t tsih_ = 0;
  bool header_digest_ = false, data_digest_ = false;

  CommandTable slots_;
  util::Fifo<uint32_t> settling_;  // completed commands in status order (OpenCommand::settling)
  struct Orphan {
    PduEvent event;
    uint64_t frame = 0;
    int64_t t = 0;
  };
  static constexpr size_t kMaxOrphans = 32;
  enum Cap : uint8_t {
    kCapUnacked = 1,
    kCapOrphans = 2,
    kCapLoginText = 4,
    kCapKeysSeen = 8,
    kCapOpenCommands = 16,
    kCapSnaplen = 32
  };
  uint8_t caps_reported_ = 0;
  std::vector<Orphan> orphans_;            // replies framed before their command (see on_pdu_end)
  TaskManagement tmf_;                     // aborts and resets awaiting their answer
  bool replaying_ = false;                 // orphans being replayed are not kept again
  uint32_t current_pdu_slot_[2] = {0, 0};  // command owning the PDU in progress per direction

  // Statistics.
  uint64_t frames_ = 0, commands_ = 0, completed_ = 0, resyncs_ = 0, digest_errors_ = 0;
  uint32_t max_outstanding_ = 0;
  static constexpr uint32_t kCountedInFlight = 64;  // above: the open count, not a scan
  int64_t latest_status_ns_ = -1;                   // of the completed commands
  uint64_t first_command_frame_ = 0;
  uint64_t notices_ = 0;
  uint64_t untracked_commands_ = 0;  // refused by the open-command cap
};

}  // namespace iscsi_doctor::session
