-- The rule constants, as docs/rules.md "Rule constants" lists them; tests/lua checks this table
-- against that one, and doc_sha256 against the whole document, so that a change of the rules
-- fails the Lua tests until this file follows (then set doc_sha256 to the new digest).
local RULES = {
  doc_sha256 = "faaef3d65213af8c67daaa3ca511a916c8768a23404ce544123abb13d5736d23",
  delayed_ack_min_ms = 10,
  think_min_ms = 2,
  think_share = 0.5,
  release_tolerance_ms = 0.3,
  release_tolerance_rtt_divisor = 10,
  jitter_window = 32,
  jitter_samples_min = 4,
  jitter_excess_max_ms = 8,
  jitter_percentile = 95,
  jitter_rtt_divisor = 2,
  wait_min_ms = 0.5,
  wait_min_rtt_divisor = 4,
  serialized_min_commands = 8,
  serialized_wait_share = 0.25,
  r2t_max_write_bytes = 16777215,
  mss_standard = 1460,
  mss_full_segments_min = 3,
  ack_record_keep_rtts = 2,
  ack_record_keep_ms = 10,
  reorder_wait_ms = 2,
  rwnd_edge_window_divisor = 4,
  near_initiator_rtt_factor = 5,
  settle_max_ms = 1000,
  closed_linger_ms = 1000,
  closed_linger_rtts = 4,
  vantage_initiator_share = 0.2,  -- the vantage is reported by the CLI; kept for the table's sake
  vantage_target_share = 0.8,
  vantage_min_rtt_ms = 0.2,
  rtt_max_ms = 120000,
  probation_rtt_samples = 4,
  probation_segments_max = 4096,
  probation_segment_cost = 128,
  probation_bytes_max = 1048576,
  probation_ms = 10000,
  probation_bytes_all_max = 67108864,
  probation_connections_max = 4096,
}

-- Options (engine/include/iscsi_doctor/analyzer.hpp)
local DEFAULT_OPTIONS = {
  ports = { [3260] = true },
  detect_ports = true,
  delayed_ack_min_ms = RULES.delayed_ack_min_ms,
  think_min_ms = RULES.think_min_ms,
  max_connections = 65536,
  idle_timeout_s = 60,
  max_open_commands = 65536,
  max_out_of_order_bytes = 4 * 1048576,
}
