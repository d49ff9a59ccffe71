---------------------------------------------------------------------------------------------
-- Both directions of one TCP connection as the capture point saw them (engine/src/tcp/tracker.hpp,
-- tracker.cpp: Tracker, Receiver): the handshake, ACKs and windows, round trips, and the byte
-- streams put back in order. It tells a Receiver what the streams carry, in stream order, and
-- knows nothing of iSCSI: the Receiver (Connection) frames the bytes and says which command each
-- delivery advanced, which the tracker keeps with the segment for ACK timing.
--
-- The Receiver interface (engine: tcp::Receiver), methods of the object given as `r`:
--   r:stream_from_syn(dir)                 a SYN starts dir's stream (it begins with a login)
--   r:stream_without_syn(dir, seg)         dir's first bytes come without a SYN
--   r:deliver(dir, s, i, n, wire_len, seg, filled_by)
--       new bytes in order: s's n bytes from position i (wire_len > n: cut by the snaplen); filled_by: the segment that
--       filled the hole they waited behind. Returns the DeliveryTag as five values: owner (the
--       command's slot, 0: none), owner_cmd (its first frame), h (its half trips, -1: none), cmd,
--       itt.
--   r:hole_filled(dir, seg, since)         seg fills a hole open since `since`
--   r:resent(dir, seg, original)           seg resends bytes already seen (original: nil if gone)
--   r:lost(dir, bytes, frame, why)         bytes never captured are given up for lost
--   r:unacked_cap_hit(dir, frame, cap)     the record of unacknowledged segments is full
-- Fields ending in "_" are the C++ class's private members: read them through the methods
-- (Connection reads flow_ and rtt_ directly only where a call per segment would show).

local Tracker = {}
Tracker.__index = Tracker

local MAX_UNACKED_RECORDS = 65536  -- Tracker::kMaxUnackedRecords
local UNSEEN = "acknowledged by the receiver but missing from the capture"
local REORDER_WAIT_NS = RULES.reorder_wait_ms * 1e6
local ECHO_KEEP_NS = RULES.echo_keep_ms * 1e6
local ECHO_MAX = RULES.echo_records_max
local NAGLE_OFF_SHORT = RULES.nagle_off_short_bytes


-- The engine's Segment{} at a frame and time: every field the rules read, zero.
local function blank_segment(frame, t)
  return { frame = frame, t = t, wire_len = 0, seq = 0, ack = 0, flags = 0, has_ts = false, tsval = 0, tsecr = 0,
           sack_left = 0, sack_right = 0 }
end

function Tracker.new(max_out_of_order_bytes)
  return setmetatable({ max_out_of_order_bytes_ = max_out_of_order_bytes,
    flow_ = { [0] = Flow.new(), [1] = Flow.new() },
    rtt_ = { [0] = RttEstimate.new(), [1] = RttEstimate.new() },  -- capture point <-> initiator, target
    saw_syn_ = false, saw_synack_ = false, closed_ = false, syn_t_ = 0, synack_t_ = 0, full_ = 0,
    filling_ = nil }, Tracker)  -- filling_: while draining, the segment that filled the hole
end

function Tracker:flow(dir) return self.flow_[dir] end
function Tracker:share_link(dir, path) self.flow_[dir].path = path end
function Tracker:rtt(side_dir) return self.rtt_[side_dir] end
-- full_: both sides' rtt_ns, read several times per segment: kept, and computed again wherever a
-- sample may change it.
local function refresh_full(t)
  local a, b = t.rtt_[0], t.rtt_[1]
  t.full_ = (a.known_ and a.min_ or 0) + (b.known_ and b.min_ or 0)
end
function Tracker:seed_rtt(side_dir, scout)
  self.rtt_[side_dir] = scout:copy()
  refresh_full(self)
end
function Tracker:rtt_ns(side_dir) return self.rtt_[side_dir]:ns() end  -- capture point <-> that side
function Tracker:full_rtt_ns() return self.full_ end  -- (hot paths read full_ itself)
function Tracker:saw_syn() return self.saw_syn_ end
function Tracker:closed() return self.closed_ end


function Tracker:handshake(seg, dir, r)
  local f = self.flow_[dir]
  if f.syn_seen and f.started and f:unwrap(seg.seq) == f.next - 1 then return end  -- SYN retransmitted
  f:anchor((seg.seq + 1) % TWO32)
  f.syn_seen = true
  r:stream_from_syn(dir)
  f.wscale_offered = seg.wscale or -1
  -- A side's MSS option says what it can receive: it bounds what the other side sends.
  if seg.mss and seg.mss ~= 0 then
    self.flow_[1 - dir].mss = seg.mss
    self.flow_[1 - dir].mss_from_syn = true
  end
  if not hasbit(seg.flags, 0x10) then
    self.saw_syn_ = true
    self.syn_t_ = seg.t
  elseif self.saw_syn_ and not self.saw_synack_ then
    self.saw_synack_ = true
    self.synack_t_ = seg.t
    self.rtt_[1]:sample(seg.t - self.syn_t_, true)
    refresh_full(self)
  end
end

-- The bytes an ACK covered never came.
function Tracker:declare_unseen(dir, r)
  local f = self.flow_[dir]
  self:declare_gap(dir, f.unseen_upto, f.unseen_frame, UNSEEN, r)  -- then next >= unseen_upto: none pending
end


-- Without both SYNs the peer's window scale is unknown: the data in flight must have fitted the
-- window the peer last advertised, so the scale is at least what makes it fit.
function Tracker.infer_window_scale(f)
  if f.peer_wscale_known or not f.una_known or f.peer_window_raw == 0 or f.max_end <= f.una then
    return
  end
  local in_flight = f.max_end - f.una
  while f.peer_wscale_min < 14 and f.peer_window_raw * 2 ^ f.peer_wscale_min < in_flight do
    f.peer_wscale_min = f.peer_wscale_min + 1
  end
end

function Tracker:drain_out_of_order(dir, seg, r)
  local f = self.flow_[dir]
  -- Held bytes reach the receiver only now, when seg fills the hole before them.
  local outer = self.filling_
  self.filling_ = seg
  while f.out_of_order_count > 0 do
    local start = f:out_of_order_first()
    if start > f.next then break end
    local held = f.out_of_order[start]
    f.out_of_order[start] = nil
    f.out_of_order_count = f.out_of_order_count - 1
    f.out_of_order_bytes = f.out_of_order_bytes - #held.bytes
    local e = start + #held.bytes
    if e > f.next then
      local skip = f.next - start
      local n = #held.bytes - skip
      -- seq: where the delivered bytes start (holds compare it with an edge)
      -- The filling segment's fields, as the engine's copy of it (Segment s = seg)
      local s = { frame = held.frame, t = held.t, wire_len = n, flags = seg.flags, seq = f.next % TWO32,
                  ack = seg.ack, has_ts = seg.has_ts, tsval = seg.tsval, tsecr = seg.tsecr,
                  sack_left = seg.sack_left, sack_right = seg.sack_right }
      f.next = f.next + n
      f:move_ref(f.next)
      r:deliver(dir, held.bytes, skip + 1, n, n, s, self.filling_)
    end
  end
  self.filling_ = outer
end

function Tracker:declare_gap(dir, upto, frame, why, r)
  local f = self.flow_[dir]
  while f.next < upto or (f.out_of_order_count > 0 and f:out_of_order_first() <= upto) do
    local hole_end = upto
    if f.out_of_order_count > 0 then hole_end = min(hole_end, f:out_of_order_first()) end
    if hole_end > f.next then
      local lost = hole_end - f.next
      f.bytes_missing = f.bytes_missing + lost
      f.next = hole_end
      f:move_ref(f.next)
      r:lost(dir, lost, frame, why)
    end
    if f.out_of_order_count == 0 then break end
    local first = f.out_of_order[f:out_of_order_first()]
    self:drain_out_of_order(dir, blank_segment(first.frame, first.t), r)
    if f.out_of_order_count == 0 or f.next >= upto then break end
  end
end

function Tracker:resend(dir, seg, start, e, r)
  local f = self.flow_[dir]
  f.last_resend_t = seg.t
  -- The first record ending past the resent byte (binary search), or one of the next few that
  -- starts before it (an overlap resend): bounded work per segment.
  local orig
  local k = f:first_unacked_ending_after(start)
  if k then
    for j = k, min(k + 7, f.ua_tail) do
      local s = f.unacked[j]
      if s.s <= start then
        -- a copy: the record is refilled once acknowledged, the rules may keep this
        orig = { s = s.s, e = s.e, t = s.t, frame = s.frame, owner = s.owner, owner_cmd = s.owner_cmd,
                 small = s.small, h = s.h, cmd = s.cmd, itt = s.itt }
        break
      end
    end
  end
  if f.una_known and e <= f.una and not orig then return end  -- spurious, already acknowledged
  r:resent(dir, seg, orig)
end

-- The per-segment path (on_segment, echo, ack, payload) as local functions of one block: no
-- method lookups (an instance miss, then the class), the flows' fields read once into locals.
do
local rtt_sample, rtt_released = RttEstimate.sample, RttEstimate.released
local effective_mss, saw_full, trim_acked = Flow.effective_mss, Flow.saw_full, Flow.trim_acked
local record_ack, link_advanced = Flow.record_ack, LinkMeter.advanced
local infer_window_scale = Tracker.infer_window_scale
local ACK_KEEP_RTTS, ACK_KEEP_NS = RULES.ack_record_keep_rtts, RULES.ack_record_keep_ms * 1e6

-- Timestamps (RFC 7323; docs/rules.md "Measures taken from TCP"): a data segment echoing a newer
-- TSval than the side's data before it left after that TSval's first segment arrived; with that
-- segment a pure ACK, a release: a round-trip sample (-1: none). f: the segment's flow, peer: the
-- other.
local function echo(f, peer, seg, t)
  -- (a ring of echo_records_max slots: record i at (i - 1) % ECHO_MAX + 1, its table refilled
  -- when the slot comes round again; keys stay in Lua's array part, no rehash as they advance)
  local ring = f.ts_firsts
  local head, tail = f.tsf_head, f.tsf_tail
  local tsval, pure = seg.tsval, seg.wire_len == 0
  if tail < head or ring[(tail - 1) % ECHO_MAX + 1].val ~= tsval then
    local keep = t - ECHO_KEEP_NS
    while head <= tail and (tail - head + 1 >= ECHO_MAX or ring[(head - 1) % ECHO_MAX + 1].t < keep) do
      head = head + 1
    end
    tail = tail + 1
    f.tsf_head, f.tsf_tail = head, tail
    local k = (tail - 1) % ECHO_MAX + 1
    local rec = ring[k]
    if rec then
      rec.val, rec.t, rec.pure = tsval, t, pure
    else
      ring[k] = { val = tsval, t = t, pure = pure }
    end
  end
  if pure or seg.flags % 32 < 16 then return -1 end
  local tsecr = seg.tsecr
  if f.data_echo_seen then
    local d = (tsecr - f.data_echo) % TWO32
    if d == 0 or d >= 2147483648 then return -1 end  -- not newer
    f.echo_moved_frame = seg.frame
  end
  f.data_echo_seen, f.data_echo = true, tsecr
  local pring = peer.ts_firsts
  for i = peer.tsf_tail, peer.tsf_head, -1 do
    local e = pring[(i - 1) % ECHO_MAX + 1]
    if e.val == tsecr then
      -- not when the peer sent data since: this may answer that data after a think time
      if e.pure and peer.last_payload_t < e.t then return t - e.t end
      return -1
    end
  end
  return -1
end

-- peer: the direction whose data this segment acknowledges.
local function ack(self, seg, dir, peer, r, t)
  if not peer.started then return end
  if self.saw_synack_ and dir == 0 and not self.rtt_[0].handshake_ and seg.flags % 4 < 2 then
    rtt_sample(self.rtt_[0], t - self.synack_t_, true)
    refresh_full(self)
  end
  local ref = peer.ref  -- (Flow:unwrap, written out)
  local a = (seg.ack - ref % TWO32) % TWO32
  if a >= 2147483648 then a = a - TWO32 end
  a = ref + a
  local max_end, nxt = peer.max_end, peer.next
  if a > max_end + 1073741824 then return end  -- nonsense ack
  if peer.fin_seen and a == nxt + 1 then a = nxt end  -- the FIN's sequence number
  -- An ACK for the segment that ended exactly here: a round-trip sample for this side.
  local tail = peer.ua_tail
  if peer.ua_head <= tail and (not peer.una_known or a > peer.una) then
    -- Records end in increasing order (each carries new data): a binary search, not a scan
    -- (Flow:first_unacked_ending_after, written out).
    local u, lo, hi, v = peer.unacked, peer.ua_head, tail + 1, a - 1
    while lo < hi do
      local mid = floor((lo + hi) / 2)
      if u[mid].e <= v then lo = mid + 1 else hi = mid end
    end
    if lo <= tail then
      local s = u[lo]
      if s.e == a then
        -- a receiver ACKs more than one full segment at once; one or less it may hold (delayed
        -- ACK, or its application's read)
        local pure = seg.wire_len == 0
        local prompt = pure and peer.una_known and lo > peer.ua_head and a - peer.una > peer:effective_mss()
        rtt_sample(self.rtt_[dir], t - s.t, false, pure, prompt)
        refresh_full(self)
      end
    end
  end
  if a > nxt then
    -- The receiver has bytes the capture has not shown: missing at the capture point. Unless they
    -- come soon after: a capture can show a segment just after the ACK that covers it. (Not when
    -- later data is already held: the receiver acknowledged past a hole the capture skipped.)
    local upto = min(a, max_end > nxt and max_end or a)
    if peer.out_of_order_count > 0 then
      self:declare_gap(1 - dir, upto, seg.frame, UNSEEN, r)
    else
      if peer.unseen_upto <= nxt then peer.unseen_t, peer.unseen_frame = t, seg.frame end
      peer.unseen_upto = max(peer.unseen_upto, upto)
    end
  end
  -- (Flow:acked, written out)
  local una_known, una = peer.una_known, peer.una
  if una_known and a <= una then return end
  local before = una_known and una or a
  peer.una, peer.una_known = a, true
  trim_acked(peer, t, seg.frame)
  local ls = peer.last_small
  if ls and ls.ack_frame == seg.frame then ls.ack_pure = seg.wire_len == 0 end
  local full = self.full_
  link_advanced(peer.link, a - before, t, full)
  local path = peer.path
  if path then link_advanced(path, a - before, t, full) end
end

local function payload(self, seg, dir, r, f, t, len)
  if not f.started then
    f:anchor(seg.seq)
    r:stream_without_syn(dir, seg)
  end
  if f.largest_payload < len then f.largest_payload = len end
  local options_len = seg.options_len
  if options_len and options_len ~= 0 then f.data_options_len = options_len end
  local ref = f.ref  -- (Flow:unwrap, written out)
  local start = (seg.seq - ref % TWO32) % TWO32
  if start >= 2147483648 then start = start - TWO32 end
  start = ref + start
  local e = start + len
  local nxt = f.next
  -- Acknowledged bytes still unseen when the sender's next data comes past them: missing.
  if start > nxt and f.unseen_upto > nxt then
    self:declare_unseen(dir, r)
    nxt = f.next
  end
  if e <= nxt then
    local keepalive = len <= 1 and start + 1 >= nxt
    if not keepalive then self:resend(dir, seg, start, e, r) end
    return
  end
  if start > nxt then
    -- Beyond a hole: kept until the hole fills, the receiver acknowledges past it, or the buffer
    -- cap is hit (then the hole is declared lost).
    f.last_resend_t = t  -- a loss before the capture point: the sender recovers from it
    if f.out_of_order_count == 0 then f.hole_since = t end
    local held = f.out_of_order[start]
    if not held then
      held = { bytes = "", t = 0, frame = 0 }
      f.out_of_order[start] = held
      f.out_of_order_count = f.out_of_order_count + 1
    end
    if #held.bytes < seg.pay_len then
      f.out_of_order_bytes = f.out_of_order_bytes + seg.pay_len - #held.bytes
      held.bytes, held.t, held.frame = payload_of(seg), t, seg.frame
    end
    f.max_end = max(f.max_end, e)
    f.ref = e  -- (Flow:move_ref)
    if f.out_of_order_bytes > self.max_out_of_order_bytes_ then
      local why = string.format("out-of-order buffer cap (%.0f bytes) hit; hole declared lost",
                                self.max_out_of_order_bytes_)
      self:declare_gap(dir, f:out_of_order_first(), seg.frame, why, r)
    end
    return
  end
  if seg.flags % 16 < 8 then saw_full(f, len) end  -- no PSH: more data was queued
  local m = effective_mss(f)
  if len > m then  -- TSO/GRO at the capture point; a whole multiple of the MSS proves it
    f.aggregates = f.aggregates + 1
    if len % m == 0 then f.aggregates_whole = f.aggregates_whole + 1 end
  end
  if f.out_of_order_count > 0 then
    f.last_resend_t = t  -- the hole's fill: most often the lost segment sent again
    r:hole_filled(dir, seg, f.hole_since)
    nxt = f.next
  end
  -- Overlap with bytes already delivered is trimmed; the rest is new, in order.
  -- (the new bytes by position in the frame's string: n from the payload's byte skip + 1)
  local skip = nxt - start
  local n = seg.pay_len
  local wire_rest = len - skip
  n = skip >= n and 0 or n - skip
  if n < wire_rest then f.bytes_missing = f.bytes_missing + wire_rest - n end  -- the snaplen
  nxt = nxt + wire_rest
  f.next = nxt  -- before delivery: a status delivered now is settled against this position
  f.ref = nxt  -- (Flow:move_ref)
  local owner, owner_cmd, h, cmd, itt = r:deliver(dir, seg.pkt, seg.pay + skip, n, wire_rest, seg, self.filling_)
  -- owner_cmd: which command held the slot then (a slot is reused once its command is released).
  -- (s and e: start and end, a Lua keyword.) Records acknowledged are taken again from the
  -- flow's free list and refilled: no table per segment.
  m = effective_mss(f)  -- (Flow:is_small, written out)
  local small = len < m or (len > m and len % m ~= 0)
  local tail = f.ua_tail
  f.data_segments = f.data_segments + 1
  if tail - f.ua_head + 1 < MAX_UNACKED_RECORDS then
    local k, rec = f.ua_free_n
    if k > 0 then
      local free = f.ua_free
      rec = free[k]
      free[k] = nil
      f.ua_free_n = k - 1
      rec.s, rec.e, rec.t, rec.frame, rec.owner, rec.owner_cmd = start, e, t, seg.frame, owner, owner_cmd
      rec.small, rec.h, rec.cmd, rec.itt = small, h, cmd, itt
    else
      rec = { s = start, e = e, t = t, frame = seg.frame, owner = owner, owner_cmd = owner_cmd,
              small = small, h = h, cmd = cmd, itt = itt }
    end
    tail = tail + 1
    f.ua_tail = tail
    f.unacked[tail] = rec
  else
    r:unacked_cap_hit(dir, seg.frame, MAX_UNACKED_RECORDS)
  end
  local una_known = f.una_known
  if una_known and f.una >= e then trim_acked(f, f.unseen_t, f.unseen_frame) end  -- its ACK came first
  if small then
    -- (one record per flow, refilled: holds read it, none keeps it)
    local ls = f.last_small
    local partial = f.mss_from_syn and m or NAGLE_OFF_SHORT  -- the handshake's MSS, else below any
    -- (right after the previous short one: sent alone, not the tail of a TSO send Nagle does not hold)
    if f.nagle_off_frame == 0 and f.has_small and len < partial and ls.len < partial and ls.e == start and
       seg.flags % 2 == 0 then
      -- A short segment sent while the previous one was unacknowledged at its sender, sooner than
      -- any ACK of it could have come back: Nagle is off on this side (Tracker::shows_nagle_off).
      local sr, pr = self.rtt_[dir], self.rtt_[1 - dir]
      if (not ls.acked or 2 * (t - ls.ack_t) < sr.min_) and sr.known_ and pr.known_ and sr:tight() and
         pr:tight() and 2 * (t - ls.t) < sr.min_ + pr.min_ then
        f.nagle_off_frame = seg.frame
      end
    end
    -- Right after the previous short one and after the pure ACK of it, the peer silent since that
    -- one: were Nagle on, that ACK released it (docs/rules.md "Nagle releases").
    if f.nagle_off_frame == 0 and f.has_small and ls.e == start and ls.acked and ls.ack_pure and t > ls.ack_t and
       self.flow_[1 - dir].last_payload_t < ls.t and seg.flags % 2 == 0 and not self.rtt_[dir]:tight() then
      if self.rtt_[dir]:nagle_release(t - ls.ack_t, t - ls.t) then refresh_full(self) end
    end
    if not ls then
      ls = {}
      f.last_small = ls
    end
    ls.e, ls.t, ls.frame, ls.h, ls.cmd, ls.acked, ls.ack_t, ls.ack_frame = e, t, seg.frame, h, cmd, false, 0, 0
    ls.ack_pure = false
    ls.len = len
    f.has_small = true
  end
  if f.max_end < e then f.max_end = e end
  if una_known and not f.peer_wscale_known then infer_window_scale(f) end
  f.last_data_t = t
  f.last_data_frame = seg.frame
  if f.out_of_order_count > 0 then self:drain_out_of_order(dir, seg, r) end  -- (none held: nothing to drain)
end

function Tracker:on_segment(seg, dir, r)
  local flows = self.flow_
  local f, other = flows[dir], flows[1 - dir]
  local t = seg.t
  local f0, f1 = flows[0], flows[1]
  if f0.unseen_upto > f0.next and t - f0.unseen_t > REORDER_WAIT_NS then self:declare_unseen(0, r) end
  if f1.unseen_upto > f1.next and t - f1.unseen_t > REORDER_WAIT_NS then self:declare_unseen(1, r) end
  local fl = seg.flags  -- FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10 (tested inline: once per segment)
  local syn, rst = fl % 4 >= 2, fl % 8 >= 4
  local una_before = other.una
  -- the other side's segments in flight before this ACK trims them (an ACK record's out_of_flight)
  local flight_before = other.ua_tail - other.ua_head + 1 + other.out_of_order_count
  if syn then self:handshake(seg, dir, r) end
  -- a release's sample is given after the segment is judged: it may not bound its own release
  local has_ts = seg.has_ts
  local released = has_ts and echo(f, other, seg, t) or -1
  local wire_len = seg.wire_len
  if wire_len > 0 then f.last_payload_t = t end
  if fl % 32 >= 16 then ack(self, seg, dir, other, r, t) end
  if wire_len > 0 and not syn then payload(self, seg, dir, r, f, t, wire_len) end
  if released >= 0 then
    rtt_released(self.rtt_[dir], released)
    refresh_full(self)
  end
  if fl % 2 == 1 or rst then
    f.fin_seen = true
    if rst or other.fin_seen then self.closed_ = true end
  end
  -- The window this side advertises limits what the other side may send. Its scale is known from
  -- both SYNs (0 when either lacks the option); else the least the data in flight proves.
  local raw = seg.window
  local win = raw
  local scale_known = f.syn_seen and other.syn_seen
  if not syn then
    local offered = f.wscale_offered
    if scale_known and offered >= 0 and other.wscale_offered >= 0 then
      win = raw * 2 ^ (offered < 14 and offered or 14)
    elseif not scale_known then
      win = raw * 2 ^ other.peer_wscale_min
    end
  end
  local window_changed = other.peer_window_known
  if window_changed then
    if scale_known then window_changed = other.peer_window ~= win else window_changed = other.peer_window_raw ~= raw end
  end
  other.peer_window, other.peer_window_raw, other.peer_wscale_known, other.peer_window_known = win, raw, scale_known,
                                                                                             true
  if not other.una_known then return end
  local una = other.una
  if una ~= una_before or window_changed or other.ak_tail < other.ak_head then
    -- what a hold's release may be matched against (rules/holds.lua)
    local rec = record_ack(other, t - ACK_KEEP_RTTS * self.full_ - ACK_KEEP_NS)
    rec.ack, rec.t, rec.frame, rec.window, rec.h, rec.cmd = una, t, seg.frame, win, other.acked_h, other.acked_cmd
    rec.data_t, rec.data_frame, rec.raw = other.acked_data_t, other.acked_data_frame, raw
    rec.tsval, rec.has_ts = seg.tsval or 0, has_ts or false
    rec.out_of_flight = other.data_segments - flight_before
  end
end
end

-- End of capture: holes still open are declared lost.
function Tracker:finish(r)
  for d = 0, 1 do
    local f = self.flow_[d]
    if f.unseen_upto > f.next then self:declare_unseen(d, r) end
    if f.out_of_order_count > 0 then
      self:declare_gap(d, f.max_end, f.out_of_order[f:out_of_order_first()].frame,
                       "the capture ended before the hole was filled", r)
    end
  end
end
