---------------------------------------------------------------------------------------------
-- retransmission (engine/src/rules/retransmission.cpp, docs/rules.md "Other findings"): a
-- segment resent after a loss, before or after the capture point; resends the receiver proves
-- spurious are counted, not findings.
--
-- commands: the connection's open commands by slot (Connection.slots: the engine's CommandTable).

local Retransmission = {}
Retransmission.__index = Retransmission

local MAX_PENDING = 64  -- Retransmission::kMaxPending

function Retransmission.new()
  -- pending_: tail resends seen near the sender or midpath, waiting for the receiver's ACK that
  -- covers them (a D-SACK makes one spurious)
  return setmetatable({ pending_ = {}, spurious_ = 0, first_spurious_frame_ = 0, dsack_ = 0,
                        first_dsack_frame_ = 0 }, Retransmission)
end

function Retransmission:pending() return #self.pending_ > 0 end

-- seg fills a hole open since `since` (the original was lost before the capture point); c: the
-- command whose PDU was in progress in that direction, if any.
function Retransmission:hole_filled(v, out, dir, seg, since, c)
  local fd = out:finding("retransmission", side_of(dir), seg.frame, ms(seg.t - since), c)
  fd.detail = "retransmission fills a hole: the original was lost before the capture point"
  if c then
    c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms
    if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
    add_finding_kind(c, "retransmission")
  end
  out:emit_finding(fd)
end

-- A resend the receiver proved spurious: counted for the engine's notice.
function Retransmission:spurious(frame, dsack)
  if dsack then
    if self.dsack_ == 0 then self.first_dsack_frame_ = frame end
    self.dsack_ = self.dsack_ + 1
  else
    if self.spurious_ == 0 then self.first_spurious_frame_ = frame end
    self.spurious_ = self.spurious_ + 1
  end
end

-- seg resends bytes already seen; orig: the tracker's record of the first send, if still kept.
function Retransmission:resent(v, out, commands, dir, seg, orig)
  -- Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  -- is spurious (a tail-loss probe, an early timeout), no loss.
  if orig and v:near(1 - dir) then
    self:spurious(seg.frame, false)
    return
  end
  -- Elsewhere a resend of the sender's latest bytes waits for the receiver's ACK that covers it: a
  -- D-SACK for it says the original had arrived.
  local f = v.tcp:flow(dir)
  local start = f:unwrap(seg.seq)
  local e = start + seg.wire_len
  local p = self.pending_
  if orig and e >= f.max_end and #p < MAX_PENDING then
    p[#p + 1] = { dir = dir, frame = seg.frame, t = seg.t, s = start, e = e, orig = orig }
    return
  end
  self:report(v, out, commands, dir, seg.frame, seg.t, orig)
end

-- seg from dir: its ACK settles the other direction's pending resends it covers, as spurious when
-- it carries a D-SACK of them or left the receiver before the resend could have reached it (the
-- original had arrived); all: the rest (the capture ended) are reported as resends.
function Retransmission:settle(v, out, commands, seg, dir, all)
  local p, keep = self.pending_, {}
  for _, r in ipairs(p) do
    local settled, spurious = all, false
    if not all and r.dir == 1 - dir and hasbit(seg.flags, 0x10) then
      local f = v.tcp:flow(r.dir)
      local ack = f:unwrap(seg.ack)
      local sl, sr = seg.sack_left or 0, seg.sack_right or 0
      if sl ~= sr then
        local l, rr = f:unwrap(sl), f:unwrap(sr)
        spurious = l < ack and l < r.e and rr > r.s  -- a D-SACK of these bytes (RFC 2883)
        if spurious then self:spurious(r.frame, true) end
      end
      settled = not spurious and ack >= r.e
      -- Sooner than the receiver's round trip (less the timing noise; jitter only delays), the ACK
      -- cannot answer the resend. Only a round trip measured on the handshake is proof: then the
      -- original had arrived; else the resend waits on, for a D-SACK or an ACK a round trip after it.
      local rtt = v:rtt_ns(dir)
      if settled and rtt > 0 and seg.t - r.t + TOLERANCE_FLOOR_NS < rtt then
        settled, spurious = false, v.tcp:rtt(dir):from_handshake()
        if spurious then self:spurious(r.frame, true) end
      end
    end
    if settled then
      self:report(v, out, commands, r.dir, r.frame, r.t, r.orig)
    elseif not spurious then
      keep[#keep + 1] = r
    end
  end
  self.pending_ = keep
end

function Retransmission:report(v, out, commands, dir, frame, t, orig)
  local fd = out:finding("retransmission", side_of(dir), frame, 0, nil)
  if orig then
    fd.related = { { "original", orig.frame } }
    fd.lost_ms = ms(t - orig.t)
    if orig.cmd and orig.cmd ~= 0 then  -- named even when the command completed before the resend
      fd.itt, fd.command_first_frame = orig.itt, orig.cmd
    end
    -- The command in the owner's slot, if it is still the one that sent the segment (a slot is
    -- reused once released).
    local c = commands[orig.owner]
    if c and c.used and c.first_frame == orig.owner_cmd then
      fd.itt, fd.command_first_frame = c.itt, c.first_frame
      -- (A settling command's status was captured before this resend, near the target: its
      -- latency stays as captured; the round trip it cost the initiator counts below.)
      if not c.settling then c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms end
      if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
      add_finding_kind(c, "retransmission")
    end
  end
  fd.detail = "segment sent again after " .. whole_ms(fd.lost_ms) .. " ms"
  out:emit_finding(fd)
end

-- At the connection's end: the engine's notices of the spurious resends (this port gives none).
function Retransmission:finish(out) end
