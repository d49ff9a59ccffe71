---------------------------------------------------------------------------------------------
-- target_think, think_or_hold and think_or_network (engine/src/rules/target_think.cpp,
-- docs/rules.md "Other findings").

local TargetThink = {}
TargetThink.__index = TargetThink
function TargetThink.new() return setmetatable({}, TargetThink) end

-- A reported command whose latency was mostly spent inside the target. When that is so only with
-- waits the capture cannot tell from holds, think_or_hold says so instead, and think_or_network
-- when it is so only with crossings timed by a round trip known only as an upper bound: never the
-- disks' advice for what may be a hold or the network.
function TargetThink:judge(v, out, c)
  local think = c.breakdown.think
  local function enough(t) return t >= v.options.think_min_ms and t >= RULES.think_share * c.latency_ms end
  local kind = "target_think"
  if not enough(think) then
    if not (c.unsure_ms > 0 and think >= v.options.think_min_ms and enough(think + c.unsure_ms)) then return end
    kind = "think_or_network"
  elseif c.undecided_ms > 0 and not enough(think - c.undecided_ms) then
    kind = "think_or_hold"
  end
  local f = out:finding(kind, "target", c.first_reply_frame ~= 0 and c.first_reply_frame or c.status_frame, think, c)
  f.related = { { "command", c.first_frame } }
  if kind == "think_or_hold" then
    f.related[2] = { "may_be_released_by", c.undecided_ack_frame }
    f.detail = "the target took " .. whole_ms(think) .. " ms to answer, or " .. whole_ms(c.undecided_ms) ..
               " ms of it was a reply held until the ACK in frame " .. string.format("%d", c.undecided_ack_frame) ..
               " reached the target: this capture cannot tell them apart (the path's delay varies more than it " ..
               "has shown, or the target's round trip is known only as an upper bound)"
  elseif kind == "think_or_network" then
    f.detail = "the target took between " .. whole_ms(think) .. " and " .. whole_ms(think + c.unsure_ms) ..
               " ms to answer: " .. whole_ms(c.unsure_ms) ..
               " ms of it was the network's round trip or the target's own time (its round trip is known " ..
               "only as an upper bound: its pure ACKs may have waited for a delayed-ACK timer)"
  else
    f.detail = "the target took " .. whole_ms(think) .. " ms to answer: the target, not the network"
  end
  add_finding_kind(c, kind)
  out:emit_finding(f)
end
