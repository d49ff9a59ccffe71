---------------------------------------------------------------------------------------------
-- Holds (engine/src/rules/holds.cpp; docs/rules.md "Holds"): a segment that was ready earlier and
-- left only when an ACK from the peer released it: nagle_hold, cwnd_limited, rwnd_limited, and
-- delayed_ack when that ACK was late. One decision over one ACK decides all four (classify_hold);
-- the waits it cannot tell from think time are the target's (think_or_hold, rules/target_think.lua).

-- Whether segment seg, ready at `ready` (capture time), waited for an ACK to release it, and
-- which: over the sender's flow, the round trips between the capture point and the sender and its
-- peer, and whether the sender is the target. A free function over what it is given: it reads
-- nothing else of the connection.
-- A congestion window is at least two segments, one only after a retransmission timeout or in a
-- loss's recovery (the engine's cwnd_could_hold): with at most one segment in flight when the
-- release reached the sender, outside recovery, no window of the sender held the segment.
local function cwnd_could_hold(f, rel, now, full)
  if f.aggregates > 0 then return true end
  local lost = f.last_resend_t
  if lost and now - lost < RULES.cwnd_recovery_ms * 1e6 + RULES.cwnd_recovery_rtts * full then return true end
  return f.data_segments - rel.out_of_flight >= 2
end

-- No hold: every field of the verdict v as the engine's HoldVerdict{} leaves it.
local function no_hold(v)
  v.held, v.kind, v.release_frame, v.release_t, v.delayed_ack_ms = false, "cwnd_limited", 0, 0, 0
  v.acked_frame, v.release_h, v.release_cmd, v.undecided = 0, -1, 0, false
  return v
end

-- v: the verdict to fill (every field is set).
local function classify_hold(f, sender, receiver, sender_is_target, delayed_ack_min_ms, seg, ready, v)
  no_hold(v)
  if not sender:known() then return v end
  local rtt_side, rtt_receiver = sender:ns(), receiver:ns()
  local full = rtt_side + rtt_receiver
  -- Jitter only delays: a release may come later than rtt(S) by the path's measured jitter, which
  -- the path between the capture point and S bounds (the engine's classify_hold).
  local tol = release_tolerance_ns(full)
  local bound = math.min(floor(full / RULES.jitter_rtt_divisor), rtt_side)
  local late = tol + math.min(sender:jitter_ns(), bound)
  -- A Nagle hold has its proof in the stream: its release may come as late as the path's largest
  -- recent round trip (the engine's nagle_late).
  local nagle_late = tol + math.min(sender:jitter_ns(RULES.nagle_jitter_percentile), bound)
  -- How late the path alone may bring the receiver's ACK: an ACK later than its round trip by no
  -- more is not proven delayed (the engine's receiver_jitter).
  local receiver_jitter = math.min(receiver:jitter_ns(RULES.nagle_jitter_percentile),
                                   math.min(floor(full / RULES.jitter_rtt_divisor), rtt_receiver))
  -- rtt(S) from ACKs that rode on S's data only is an upper bound: near S a release may come as
  -- soon as just after the ACK (the engine's early).
  local early = tol
  if not sender:tight() and rtt_side * RULES.wait_min_rtt_divisor < full then
    early = max(tol, rtt_side)
  end
  local function released_within(ack_t, upto, soonest)
    local e = soonest or early  -- how much sooner than rtt(S) after the ACK
    local d = seg.t - (ack_t + rtt_side)
    return d >= -e and d <= upto and ack_t + rtt_side - e + tol > ready
  end
  -- ACK causality by timestamps (engine: echoes): a segment echoing the ACK's timestamp or a later
  -- one left after that ACK reached its sender; only the earliest the release can be seen is timing's.
  local function echoes(r)
    return r.has_ts and seg.has_ts and (seg.tsecr - r.tsval) % TWO32 < 2147483648 and
           released_within(r.t, seg.t - r.t)
  end
  local len = seg.wire_len
  local small = f.last_small
  -- Nagle holds one partial segment: a TSO/GRO aggregate carries full segments that Nagle would
  -- have sent, so its wait is the window's. A segment longer than the MSS is such an aggregate once
  -- the flow has shown whole-multiple ones; before, it may be one jumbo frame, judged by its tail.
  local nagle_candidate = len < f:effective_mss() or (f.aggregates_whole == 0 and f:is_small(len))
  if f.nagle_off_frame == 0 and f.has_small and small.acked and small.frame ~= seg.frame and nagle_candidate and
     released_within(small.ack_t, nagle_late) then
    v.held = true
    v.kind = "nagle_hold"
    v.release_frame = small.ack_frame
    v.release_t = small.ack_t
    v.acked_frame = small.frame
    v.release_h, v.release_cmd = small.h or -1, small.cmd or 0
    local ack_delay = small.ack_t - small.t - rtt_receiver
    if ms(ack_delay - receiver_jitter) >= delayed_ack_min_ms then v.delayed_ack_ms = ms(ack_delay) end
    return v
  end
  -- Window holds: released by the first ACK that could have reached the sender when this segment
  -- left, not always the latest one captured; one that fits a steady path first, only without
  -- one a later ACK within the path's jitter.
  local a = f.acks
  local function first_release(upto)
    local i = f.ak_tail + 1
    while i > f.ak_head and a[i - 1].t + rtt_side + upto >= seg.t do i = i - 1 end
    while i <= f.ak_tail and not released_within(a[i].t, upto) do i = i + 1 end
    return i
  end
  -- Window arithmetic first: where the sender stopped at the edge an ACK had offered and this
  -- segment lies past it, the first ACK that opened the window past it released it, if the path's
  -- bounds let it reach the sender by then (the engine's at_edge).
  local seg_start = f:unwrap(seg.seq)
  local mss = f:effective_mss()
  local i = f:first_opening(f:first_wire_end(seg.seq, seg.wire_len))
  local at_edge = i > f.ak_head and i <= f.ak_tail and seg_start <= f:edge(a[i - 1]) and
                  seg_start + mss > f:edge(a[i - 1])
  local at_edge_i = i
  if not (at_edge and (released_within(a[i].t, late) or echoes(a[i]))) then
    i = first_release(tol)
    if i > f.ak_tail and late > tol then i = first_release(late) end
  end
  if i > f.ak_tail then
    -- Beyond what the path has shown, within the most it may add: an ACK this wait had to follow
    -- still fits; the capture cannot tell think from a hold (the engine's undecided).
    -- rtt(S) only an upper bound (its ACKs delayed or on its replies): the release may come as soon
    -- as just after the ACK (the engine's may_follow).
    local most = tol + bound
    local upper_bound = sender:upper_bound_only()
    local function may_follow(ack_t) return released_within(ack_t, most, upper_bound and rtt_side or nil) end
    if sender_is_target and (most > max(late, nagle_late) or upper_bound) then
      if f.nagle_off_frame == 0 and f.has_small and small.acked and small.frame ~= seg.frame and nagle_candidate and
         may_follow(small.ack_t) then
        v.undecided, v.release_frame = true, small.ack_frame
      elseif at_edge and may_follow(a[at_edge_i].t) then
        v.undecided, v.release_frame = true, a[at_edge_i].frame
      end
    end
    return v
  end
  local rel = a[i]
  v.held = true
  v.release_frame = rel.frame
  v.release_t = rel.t
  v.release_h, v.release_cmd = rel.h, rel.cmd
  -- The release may itself have been held by the receiver's delayed-ACK timer (an odd segment
  -- at the end of a flight): measured as for Nagle holds.
  local acknowledged_more = i == f.ak_head or rel.ack > a[i - 1].ack  -- not a window update
  if rel.data_frame ~= 0 and acknowledged_more then
    local ack_delay = rel.t - rel.data_t - rtt_receiver
    if ms(ack_delay - receiver_jitter) >= delayed_ack_min_ms then
      v.delayed_ack_ms = ms(ack_delay)
      v.acked_frame = rel.data_frame
    end
  end
  -- The edge in force until the release: data that came within a quarter window (at least one
  -- segment) of it means the receiver's window held the sender, not the congestion window.
  local before = i > f.ak_head and a[i - 1] or nil
  -- (With the window scale unknown, no SYNs, the edge is the lower bound the data in flight proves
  -- by now.)
  local window = before and f:edge(before) - before.ack
  -- (Data sent past that edge before this segment proves it was not in force.)
  if before and f:unwrap(seg.seq) <= before.ack + window and f.max_end + max(f:effective_mss(), floor(window / RULES.rwnd_edge_window_divisor)) > before.ack + window then
    v.kind = "rwnd_limited"
  elseif cwnd_could_hold(f, rel, seg.t, full) then
    v.kind = "cwnd_limited"
  else
    no_hold(v)  -- nothing in flight to hold it: a coincidence of timing (S's own time)
  end
  return v
end


local Holds = {}
Holds.__index = Holds
-- verdict_: a segment's own verdict, refilled per segment judged (it lives while the segment's
-- path events are analysed; what is kept of it is copied out).
function Holds.new()
  return setmetatable({ verdict_ = { held = false, reported = false, kind = "cwnd_limited", release_frame = 0,
    release_t = 0, delayed_ack_ms = 0, acked_frame = 0, release_h = -1, release_cmd = 0, undecided = false } },
    Holds)
end

-- A verdict already given (read only): framing found late (a stream joined mid-session is framed
-- once the next header confirms it) places a PDU carried by earlier segments at those segments,
-- with no hold judged.
local NO_HOLD = { held = false, reported = true }
-- The verdict of a segment not judged yet (read only: on_wait makes the segment's own).
local NOT_JUDGED = { held = false, reported = false }

-- The hold's time on the critical path (docs/rules.md "The critical path"): a rest (ns) longer
-- than a wait before seg on command c's path, judged once per segment (verdict: NOT_JUDGED, or
-- the segment's verdict so far); a hold's findings are kept with c until it is reported, its time
-- goes to c's breakdown and half trips. Returns the rest a hold did not explain, and the verdict
-- (the segment's own once judged).
function Holds:on_wait(v, out, dir, seg, c, ready, rest, verdict)
  if not verdict.reported then
    if verdict == NOT_JUDGED then verdict = self.verdict_ end
    classify_hold(v.tcp:flow(dir), v.tcp:rtt(dir), v.tcp:rtt(1 - dir), dir == T2I,
                  v.options.delayed_ack_min_ms, seg, ready, verdict)
    verdict.reported = true
    if verdict.held then self:report(out, dir, seg, c, verdict, ms(rest)) end
  end
  if verdict.undecided then
    c.undecided_ms = c.undecided_ms + ms(rest)
    c.undecided_ack_frame = verdict.release_frame
  end
  if not verdict.held then return rest, verdict end
  local bd = c.breakdown
  local held_ms = ms(rest)
  local dack = min(verdict.delayed_ack_ms, held_ms)
  bd.delayed_ack = bd.delayed_ack + dack
  if verdict.kind == "nagle_hold" then
    bd.nagle = bd.nagle + held_ms - dack
  else
    bd.window = bd.window + held_ms - dack
    local part = verdict.kind == "cwnd_limited" and "cwnd" or "rwnd"
    bd[part] = bd[part] + held_ms - dack
  end
  add_finding_kind(c, verdict.kind)
  if dack > 0 then add_finding_kind(c, "delayed_ack") end
  -- Two crossings after the data the releasing ACK acknowledged: that ACK's, and this one's
  -- (data of another command says nothing of this one's progress: then on top of it).
  local h = dir == I2T and c.h_initiator or c.h_target
  local h_before = h
  if verdict.release_h >= 0 and verdict.release_cmd == c.first_frame then
    h = max(h, verdict.release_h + 2)
  else
    h = h + 2
  end
  c.held_h = c.held_h + h - h_before
  if dir == I2T then c.h_initiator = h else c.h_target = h end
  return 0, verdict
end

-- seg went on from c's flight without a wait of its own: the ACK that released it (a window's
-- edge, an echoed timestamp: the engine's window_edge_half_trips and echo_half_trips, written out
-- here) still counts its crossings (docs/rules.md "Round trips").
do
-- (per segment: the flow's searches and release_half_trips as upvalues, the tracker read once)
local first_opening, first_with_ts, effective_mss = Flow.first_opening, Flow.first_with_ts, Flow.effective_mss
function Holds:on_release(v, dir, seg, c)
  local tcp = v.tcp
  if not tcp.rtt_[dir].known_ then return end
  local f = tcp.flow_[dir]
  -- Window arithmetic: more of a flight past the edge the ACKs had offered could leave only once
  -- an ACK opening that far reached the sender (Flow:first_wire_end and unwrap written out).
  local len, mss = seg.wire_len, effective_mss(f)
  local ref = f.ref
  local d = (seg.seq - ref % TWO32) % TWO32
  if d >= 2147483648 then d = d - TWO32 end
  local i = first_opening(f, ref + d + (len < mss and len or mss))
  local release_half_trips = Holds.release_half_trips
  if i <= f.ak_tail then release_half_trips(self, v, dir, seg, c, f.acks[i]) end  -- the first ACK that opened the window this far
  -- ACK causality by timestamps: a segment echoing a newer timestamp than the data before it was
  -- released by an ACK in between (the first with that timestamp, at the least).
  if not seg.has_ts or f.echo_moved_frame ~= seg.frame then return end
  i = first_with_ts(f, seg.tsecr)
  if i <= f.ak_tail then release_half_trips(self, v, dir, seg, c, f.acks[i]) end
end
end

-- A segment released by ACK r without a wait of its own: two crossings after the data r
-- acknowledged, when that was this command's and r could have reached the sender by then.
function Holds:release_half_trips(v, dir, seg, c, r)
  if r.h < 0 or r.cmd ~= c.first_frame then return end
  local tcp = v.tcp  -- (v:rtt_ns and v:tolerance_ns written out: per segment)
  local full = tcp.full_
  if r.t + tcp.rtt_[dir].min_ - release_tolerance_ns(full) > seg.t then return end
  local h = dir == I2T and c.h_initiator or c.h_target
  if r.h + 2 > h then
    c.held_h = c.held_h + r.h + 2 - h  -- as a hold's (a link-bound command takes them back)
    if dir == I2T then c.h_initiator = r.h + 2 else c.h_target = r.h + 2 end
  end
end

-- A held segment: nagle_hold, cwnd_limited or rwnd_limited on its sender, and delayed_ack on the
-- peer when the releasing ACK was itself late; kept with the command until it is reported.
function Holds:report(out, dir, seg, c, verdict, held_ms)
  local fd = out:finding(verdict.kind, side_of(dir), seg.frame, held_ms, c)
  fd.related = { { "released_by", verdict.release_frame } }
  if verdict.acked_frame ~= 0 then fd.related[2] = { "previous_small", verdict.acked_frame } end
  if verdict.kind == "nagle_hold" then
    fd.detail = "sub-MSS segment held until the peer acknowledged the previous one"
  elseif verdict.kind == "rwnd_limited" then
    fd.detail = "sender waited for the receiver's window to open"
  else
    fd.detail = "sender waited for ACKs to grow its congestion window"
  end
  c.held_findings[#c.held_findings + 1] = fd  -- given with the command (rules/link_limited.lua)
  if verdict.delayed_ack_ms > 0 then
    local da = out:finding("delayed_ack", side_of(1 - dir), verdict.release_frame,
                           min(verdict.delayed_ack_ms, held_ms), c)
    da.related = { { "acks", verdict.acked_frame }, { "released", seg.frame } }
    da.detail = "ACK sent " .. whole_ms(verdict.delayed_ack_ms) .. " ms late by the delayed-ACK timer while the peer waited"
    c.held_findings[#c.held_findings + 1] = da
  end
end
