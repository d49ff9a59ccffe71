---------------------------------------------------------------------------------------------
-- serialized (engine/src/rules/serialized.cpp, docs/rules.md "Other findings"): a
-- connection-level verdict.

local Serialized = {}
Serialized.__index = Serialized
function Serialized.new()
  return setmetatable({ commands_ = 0, wait_ms_ = 0, cycle_ms_ = 0, crossing_ms_ = 0, unsure_ms_ = 0,
                        bound_ms_ = 0 }, Serialized)
end

-- A completed command reported while no other was ever in flight with it; latest_status_t: the
-- latest status of the commands completed before it (nil: none). Time the command's cycle spent
-- on the network with nothing else in flight. The cycle includes the crossing from the previous
-- status to this command (up to rtt(initiator)): near the target that is where the round trip
-- lies, near the initiator it is ~0.
function Serialized:count(v, c, latest_status_t)
  local b = c.breakdown
  local back = 0
  if latest_status_t and c.first_t > latest_status_t then
    back = ms(min(c.first_t - latest_status_t, v:rtt_ns(I2T)))
  end
  self.commands_ = self.commands_ + 1
  self.cycle_ms_ = self.cycle_ms_ + c.latency_ms + back
  local crossings = b.request + b.r2t + b.response + back
  -- Crossings timed by a round trip that may hold the answering side's own time (the initiator's
  -- for the way back to its next command).
  local bound = c.bound_ms
  local late = floor(v.options.delayed_ack_min_ms * 1e6 + 0.5)
  if back > 0 and v.tcp:rtt(I2T):may_hold_side_time(late) then
    bound = bound + back
  end
  -- Where think_or_network said a crossing may be the target's own time, it is not the network's.
  if c.findings_set.think_or_network then
    local unsure = min(c.unsure_ms, crossings)
    crossings = crossings - unsure
    bound = bound - unsure
    self.unsure_ms_ = self.unsure_ms_ + unsure
  end
  self.wait_ms_ = self.wait_ms_ + crossings + b.nagle + b.delayed_ack + b.window
  -- Holds are claimed (and ranked) by their own findings; only the crossings are this one's.
  self.crossing_ms_ = self.crossing_ms_ + crossings
  self.bound_ms_ = self.bound_ms_ + max(0, min(bound, crossings))
end

-- The connection's verdict at its end: max_outstanding, the most commands in flight at once;
-- first_command_frame, where its first command began.
function Serialized:judge(out, max_outstanding, first_command_frame)
  if self.commands_ < RULES.serialized_min_commands or max_outstanding > 1 or
     self.wait_ms_ < RULES.serialized_wait_share * self.cycle_ms_ then
    return
  end
  local f = out:finding("serialized", "initiator", first_command_frame, self.crossing_ms_, nil)
  f.detail = self.commands_ .. " commands issued one at a time; the link sat idle waiting on round trips for " ..
             whole_ms(self.wait_ms_) .. " ms ("
  local network, bound = whole_ms(self.crossing_ms_ - self.bound_ms_), whole_ms(self.bound_ms_)
  if bound == "0" or network ~= "0" then f.detail = f.detail .. network .. " ms of it crossing the network" end
  if bound ~= "0" then
    f.detail = f.detail .. (network ~= "0" and " and " .. bound .. " ms either that"
                                           or bound .. " ms of it either crossing the network") ..
               " or the answering side's own time, which this capture cannot tell apart: its round trip is " ..
               "known only as an upper bound"
  end
  f.detail = f.detail .. ")"
  if self.unsure_ms_ > 0 then
    f.detail = f.detail .. "; " .. whole_ms(self.unsure_ms_) ..
               " ms more may have been the network or the target (think_or_network), not counted"
  end
  out:emit_finding(f)
end
