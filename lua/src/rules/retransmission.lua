---------------------------------------------------------------------------------------------
-- retransmission (engine/src/rules/retransmission.cpp): a segment resent after a loss.

-- The capture point is near this side (its round trip a small part of the path's).
function Connection:near(side)
  local full = self:full_rtt_ns()
  return self.rtt[I2T].known and self.rtt[T2I].known and full >= floor(RULES.vantage_min_rtt_ms * 1e6 + 0.5) and
         self:rtt_ns(side) * RULES.near_initiator_rtt_factor < full
end

function Connection:note_retransmission(dir, seg, start, e)
  local f = self.flow[dir]
  self.retransmissions = self.retransmissions + 1
  -- The first record ending past the resent byte (binary search), or one of the next few that
  -- starts before it (an overlap resend): bounded work per segment.
  local orig
  local k = f:first_unacked_ending_after(start)
  if k then
    for j = k, min(k + 7, f.ua_tail) do
      local s = f.unacked[j]
      if s.s <= start then orig = s break end
    end
  end
  if f.una_known and e <= f.una and not orig then return end
  -- Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  -- is spurious (a tail-loss probe, an early timeout), no loss (engine: Connection::resent).
  if orig and self:near(1 - dir) then return end
  local fd = { kind = "retransmission", side = side_of(dir), frame = seg.frame, lost_ms = 0 }
  if orig then
    fd.related = { { "original", orig.frame } }
    fd.lost_ms = ms(seg.t - orig.t)
    if orig.cmd and orig.cmd ~= 0 then  -- named even when the command completed before the resend
      fd.itt, fd.command_first_frame = orig.itt, orig.cmd
    end
    -- The command in the owner's slot now (engine: a slot index, reused once released).
    local c = self.slots[orig.owner]
    if c and c.used and c.first_frame == orig.owner_cmd then
      fd.itt, fd.command_first_frame = c.itt, c.first_frame
      -- (A settling command's status was captured before this resend, near the target: its
      -- latency stays as captured; the round trip it cost the initiator counts below.)
      if not c.settling then c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms end
      if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
      self:add_kind(c, "retransmission")
    end
  end
  fd.detail = "segment sent again after " .. whole_ms(fd.lost_ms) .. " ms"
  self:emit_finding(fd)
end
