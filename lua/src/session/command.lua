---------------------------------------------------------------------------------------------
-- A SCSI command while it is open (engine/src/session/command.hpp): the two directions of a
-- connection's streams, the breakdown a command starts with, and the kinds of finding it had.

local I2T, T2I = 0, 1
local function side_of(dir) return dir == I2T and "initiator" or "target" end

-- (engine: Breakdown's defaults; cwnd + rwnd: window's parts)
local function new_breakdown()
  return { request = 0, think = 0, data = 0, nagle = 0, delayed_ack = 0, r2t = 0, window = 0,
           loss = 0, response = 0, link = 0, cwnd = 0, rwnd = 0 }
end

-- The command's result names each kind of finding it had once, in order of first evidence.
local function add_finding_kind(c, k)
  if not c.findings_set[k] then
    c.findings_set[k] = true
    c.findings[#c.findings + 1] = k
  end
end

-- A rest longer than this is a wait (docs/rules.md "The critical path"); the jitter allowance
-- when matching a release to the ACK that caused it (integer ns, as the engine).
local WAIT_MIN_FLOOR_NS = floor(RULES.wait_min_ms * 1e6 + 0.5)
local function wait_min_ns(full_rtt_ns)
  local wait_rtt = floor(full_rtt_ns / RULES.wait_min_rtt_divisor)
  return WAIT_MIN_FLOOR_NS > wait_rtt and WAIT_MIN_FLOOR_NS or wait_rtt
end
local TOLERANCE_FLOOR_NS = floor(RULES.release_tolerance_ms * 1e6 + 0.5)
local function release_tolerance_ns(full_rtt_ns)
  return TOLERANCE_FLOOR_NS + floor(full_rtt_ns / RULES.release_tolerance_rtt_divisor)
end
