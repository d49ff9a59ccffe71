---------------------------------------------------------------------------------------------
-- A connection's rules (the engine's rules/rules.cpp, docs/architecture.md "The rules as units"):
-- each rule a unit of its own file under rules/, and here the order in which a reported command
-- meets them.

local Rules = {}
Rules.__index = Rules

function Rules.new()
  return setmetatable({
    holds = Holds.new(),                    -- on the critical path, segment by segment (session/critical_path.lua)
    retransmission = Retransmission.new(),  -- on the tracker's hole and resend events
    link_limited = LinkLimited.new(), r2t_round_trip = R2tRoundTrip.new(), target_think = TargetThink.new(),
    serialized = Serialized.new() }, Rules)
end

-- A completed command as it is reported. one_at_a_time: no other command was ever in flight with
-- it; latest_status_t: the latest status of the commands completed before it (nil: none).
function Rules:judge_command(v, out, c, one_at_a_time, latest_status_t)
  self.link_limited:judge(v, out, c)  -- before the holds are given: those the link explains are not
  self.link_limited:give_held_findings(v, out, c)
  self.r2t_round_trip:judge(out, c)
  self.target_think:judge(v, out, c)
  if one_at_a_time then self.serialized:count(v, c, latest_status_t) end
end

-- Any command as it is reported (an open one too): the held findings not given yet.
function Rules:give_held_findings(v, out, c) self.link_limited:give_held_findings(v, out, c) end

-- The connection's end: its connection-level verdicts and notices.
function Rules:finish(out, max_outstanding, first_command_frame)
  self.serialized:judge(out, max_outstanding, first_command_frame)
  self.retransmission:finish(out)
end
