---------------------------------------------------------------------------------------------
-- target_think, think_or_hold and think_or_network (engine/src/rules/target_think.cpp, docs/rules.md "Other
-- findings").

local TargetThink = {}
TargetThink.__index = TargetThink
function TargetThink.new() return setmetatable({}, TargetThink) end

-- A reported command whose latency was mostly spent inside the target. When that is so only with
-- waits the capture cannot tell from holds, think_or_hold says so instead: never the disks' advice
-- for what may be a Nagle or window hold.
function TargetThink:judge(v, out, c)
  local think = c.breakdown.think
  local function enough(t) return t >= v.options.think_min_ms and t >= RULES.think_share * c.latency_ms end
  if not enough(think) then
    -- The crossing before the reply, timed by a round trip known only as an upper bound, may be
    -- any part the target's own time: say so when that decides it, never the disks' advice.
    if c.unsure_ms > 0 and think >= v.options.think_min_ms and enough(think + c.unsure_ms) then
      local f = out:finding("think_or_network", "target",
                            c.first_reply_frame ~= 0 and c.first_reply_frame or c.status_frame, think, c)
      f.related = { { "command", c.first_frame } }
      f.detail = "the target took between " .. whole_ms(think) .. " and " .. whole_ms(think + c.unsure_ms) ..
                 " ms to answer: " .. whole_ms(c.unsure_ms) ..
                  " ms of it was the network's round trip or the target's own time (its round trip is known " ..
                 "only as an upper bound: its pure ACKs may have waited for a delayed-ACK timer)"
      add_finding_kind(c, "think_or_network")
      out:emit_finding(f)
    end
    return
  end
  local undecided = c.undecided_ms > 0 and not enough(think - c.undecided_ms)
  local kind = undecided and "think_or_hold" or "target_think"
  local f = out:finding(kind, "target", c.first_reply_frame ~= 0 and c.first_reply_frame or c.status_frame, think, c)
  f.related = { { "command", c.first_frame } }
  if undecided then
    f.related[2] = { "may_be_released_by", c.undecided_ack_frame }
    f.detail = "the target took " .. whole_ms(think) .. " ms to answer, or " .. whole_ms(c.undecided_ms) ..
               " ms of it was a reply held until the ACK in frame " .. string.format("%d", c.undecided_ack_frame) ..
               " reached the target: this capture cannot tell them apart (the path's delay varies more than it " ..
               "has shown, or the target's round trip is known only as an upper bound)"
  else
    f.detail = "the target took " .. whole_ms(think) .. " ms to answer: the target, not the network"
  end
  add_finding_kind(c, kind)
  out:emit_finding(f)
end
