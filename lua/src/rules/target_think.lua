---------------------------------------------------------------------------------------------
-- target_think (engine/src/rules/target_think.cpp, docs/rules.md "Other findings").

-- Most of the latency spent inside the target. When that is so only with waits the capture
-- cannot tell from holds, think_or_hold says so instead: never the disks' advice for what may be
-- a Nagle or window hold.
function Connection:judge_target_think(c)
  local think = c.breakdown.think
  local function enough(t) return t >= self.opt.think_min_ms and t >= RULES.think_share * c.latency_ms end
  if not enough(think) then return end
  local undecided = c.undecided_ms > 0 and not enough(think - c.undecided_ms)
  local kind = undecided and "think_or_hold" or "target_think"
  local fd = { kind = kind, side = "target",
    frame = c.first_reply_frame ~= 0 and c.first_reply_frame or c.status_frame,
    related = { { "command", c.first_frame } }, lost_ms = think, itt = c.itt,
    command_first_frame = c.first_frame,
    detail = "the target took " .. whole_ms(think) .. " ms to answer: the target, not the network" }
  if undecided then
    fd.related[2] = { "may_be_released_by", c.undecided_ack_frame }
    fd.detail = "the target took " .. whole_ms(think) .. " ms to answer, or " .. whole_ms(c.undecided_ms) ..
                " ms of it was a reply held until the ACK in frame " .. string.format("%d", c.undecided_ack_frame) ..
                " reached the target: the path's delay varies more than this capture can tell apart"
  end
  self:add_finding_kind(c, kind)
  self:emit_finding(fd)
end
