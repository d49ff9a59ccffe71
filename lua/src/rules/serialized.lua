---------------------------------------------------------------------------------------------
-- serialized (engine/src/rules/serialized.cpp, docs/rules.md "Other findings"): a
-- connection-level verdict.

-- Time the command's cycle spent on the network with nothing else in flight. The cycle includes
-- the crossing from the previous status to this command (up to rtt(initiator)): near the target
-- that is where the round trip lies, near the initiator it is ~0.
function Connection:count_serialized(c)
  local b = c.breakdown
  local back = 0
  if self.latest_status_t and c.first_t > self.latest_status_t then
    back = ms(min(c.first_t - self.latest_status_t, self:rtt_ns(I2T)))
  end
  self.serial_commands = self.serial_commands + 1
  self.serial_cycle_ms = self.serial_cycle_ms + c.latency_ms + back
  local crossings = b.request + b.r2t + b.response + back
  self.serial_wait_ms = self.serial_wait_ms + crossings + b.nagle + b.delayed_ack + b.window
  -- Holds are claimed (and ranked) by their own findings; only the crossings are this one's.
  self.serial_crossing_ms = self.serial_crossing_ms + crossings
end

-- The connection's verdict at its end: commands one at a time, the link idle on round trips.
function Connection:judge_serialized()
  if self.serial_commands < RULES.serialized_min_commands or self.max_outstanding > 1 or
     self.serial_wait_ms < RULES.serialized_wait_share * self.serial_cycle_ms then
    return
  end
  self:emit_finding({ kind = "serialized", side = "initiator", frame = self.first_command_frame,
    lost_ms = self.serial_crossing_ms,
    detail = self.serial_commands .. " commands issued one at a time; the link sat idle waiting on round trips for " ..
             whole_ms(self.serial_wait_ms) .. " ms (" .. whole_ms(self.serial_crossing_ms) ..
             " ms of it crossing the network)" })
end
