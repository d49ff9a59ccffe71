---------------------------------------------------------------------------------------------
-- retransmission (engine/src/rules/retransmission.cpp): a segment resent after a loss.

-- The capture point is near this side (its round trip a small part of the path's).
function Connection:near(side)
  local full = self:full_rtt_ns()
  return self.tcp:rtt(I2T):known() and self.tcp:rtt(T2I):known() and full >= floor(RULES.vantage_min_rtt_ms * 1e6 + 0.5) and
         self:rtt_ns(side) * RULES.near_initiator_rtt_factor < full
end

local MAX_PENDING_RESENDS = 64

-- A segment fills a hole in the stream: the original was lost before the capture point.
function Connection:hole_filled(dir, seg, since)
  local fd = { kind = "retransmission", side = side_of(dir), frame = seg.frame, lost_ms = ms(seg.t - since),
               detail = "retransmission fills a hole: the original was lost before the capture point" }
  local c = self.current_slot[dir]
  if c and c.used then
    fd.itt, fd.command_first_frame = c.itt, c.first_frame
    c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms
    if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
    self:add_finding_kind(c, "retransmission")
  end
  self:emit_finding(fd)
end

-- seg resends bytes already seen (the tracker found the original, or says it is no longer kept).
function Connection:resent(dir, seg, orig)
  -- Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  -- is spurious (a tail-loss probe, an early timeout), no loss.
  if orig and self:near(1 - dir) then return end
  -- Elsewhere a resend of the sender's latest bytes waits for the receiver's ACK that covers it: a
  -- D-SACK for it says the original had arrived.
  local f = self.tcp:flow(dir)
  local start = f:unwrap(seg.seq)
  local e = start + seg.wire_len
  local p = self.pending_resends
  if orig and e >= f.max_end and #p < MAX_PENDING_RESENDS then
    p[#p + 1] = { dir = dir, frame = seg.frame, t = seg.t, s = start, e = e, orig = orig }
    return
  end
  self:report_resend(dir, seg.frame, seg.t, orig)
end

-- seg from dir: its ACK settles the other direction's pending resends it covers, as spurious when
-- it carries a D-SACK of them or left the receiver before the resend could have reached it; all:
-- the rest (the capture ended) are reported as resends (engine: Connection::settle_resends).
function Connection:settle_resends(seg, dir, all)
  local p, keep = self.pending_resends, {}
  for _, r in ipairs(p) do
    local settled, spurious = all, false
    if not all and r.dir == 1 - dir and hasbit(seg.flags, 0x10) then
      local f = self.tcp:flow(r.dir)
      local ack = f:unwrap(seg.ack)
      local sl, sr = seg.sack_left or 0, seg.sack_right or 0
      if sl ~= sr then
        local l, rr = f:unwrap(sl), f:unwrap(sr)
        spurious = l < ack and l < r.e and rr > r.s  -- a D-SACK of these bytes (RFC 2883)
      end
      settled = not spurious and ack >= r.e
      -- (an ACK that left the receiver before the resend could have reached it: the original had
      -- arrived; proof only with a round trip measured on the handshake, else the resend waits on)
      local rtt = self:rtt_ns(dir)
      if settled and rtt > 0 and seg.t - r.t + floor(RULES.release_tolerance_ms * 1e6 + 0.5) < rtt then
        settled, spurious = false, self.tcp:rtt(dir):from_handshake()
      end
    end
    if settled then
      self:report_resend(r.dir, r.frame, r.t, r.orig)
    elseif not spurious then
      keep[#keep + 1] = r
    end
  end
  self.pending_resends = keep
end

function Connection:report_resend(dir, frame, t, orig)
  local fd = { kind = "retransmission", side = side_of(dir), frame = frame, lost_ms = 0 }
  if orig then
    fd.related = { { "original", orig.frame } }
    fd.lost_ms = ms(t - orig.t)
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
      self:add_finding_kind(c, "retransmission")
    end
  end
  fd.detail = "segment sent again after " .. whole_ms(fd.lost_ms) .. " ms"
  self:emit_finding(fd)
end
