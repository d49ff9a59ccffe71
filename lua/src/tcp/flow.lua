---------------------------------------------------------------------------------------------
-- TCP flow, one direction (engine/src/tcp/flow.*)

local Flow = {}
Flow.__index = Flow

function Flow.new()
  return setmetatable({ started = false, syn_seen = false, fin_seen = false, next = 0, max_end = 0,
    una = 0, una_known = false, peer_window = 0, peer_window_known = false,
    peer_wscale_known = false, peer_wscale_min = 0, peer_window_raw = 0, wscale_offered = -1, mss = 0,
    mss_from_syn = false, largest_payload = 0, full_min = 0, full_count = 0, aggregates = 0, aggregates_whole = 0, data_options_len = 0, has_small = false, last_small = nil,
    last_data_t = 0, last_data_frame = 0, has_last_data = false,
    unacked = {}, ua_head = 1, ua_tail = 0, ooo = {}, ooo_count = 0, ooo_bytes = 0,
    hole_since = 0, bytes_missing = 0, ref = 0, acked_h = -1, acked_cmd = 0, acked_data_t = 0,
    acked_data_frame = 0, unseen_upto = 0, unseen_t = 0, unseen_frame = 0,
    acks = {}, ak_head = 1, ak_tail = 0,
    -- this side's recent timestamps at first sight; its latest data segment's echo (engine: Flow)
    tsf = {}, tsf_head = 1, tsf_tail = 0, last_payload_t = -math.huge,
    data_echo = 0, data_echo_seen = false, echo_moved_frame = 0,
    link = { last_t = -1, busy_ns = 0, busy_bytes = 0, run_ns = 0, run_bytes = 0, rate = 0, rate_bytes = 0 } },
    Flow)
end

-- The path's rate as the peer's ACKs show it (engine: tcp::LinkMeter, docs/rules.md "The link"):
-- its fastest train of ACKs each under a quarter round trip apart, and the busy time: gaps up to
-- two round trips whose ACK acknowledged data at no less than a quarter of that rate.
local function link_advanced(m, bytes, t, rtt)
  local gap = m.last_t < 0 and -1 or t - m.last_t
  m.last_t = t
  if gap < 0 then return end
  if gap <= floor(rtt / RULES.link_train_gap_rtt_divisor) then
    m.run_ns = m.run_ns + gap
    m.run_bytes = m.run_bytes + bytes
    if m.run_bytes >= RULES.link_run_bytes_min and m.run_ns > 0 then
      local r = m.run_bytes * 1e9 / m.run_ns
      if r > m.rate then m.rate, m.rate_bytes = r, m.run_bytes end
    end
  else
    m.run_ns, m.run_bytes = 0, 0
  end
  if m.rate > 0 and gap <= rtt * RULES.link_busy_gap_rtts and
     bytes * 1e9 >= gap * m.rate / RULES.link_busy_rate_divisor then
    m.busy_ns = m.busy_ns + gap
    m.busy_bytes = m.busy_bytes + bytes
  end
end

function Flow:unwrap(seq)
  local d = (seq - self.ref % TWO32) % TWO32
  if d >= 2147483648 then d = d - TWO32 end
  return self.ref + d
end
function Flow:anchor(seq)
  self.ref = TWO32 + seq
  self.started = true
  self.next, self.max_end, self.una = self.ref, self.ref, self.ref
end
function Flow:move_ref(abs) self.ref = abs end
-- The SYN's MSS option does not count the TCP options of data segments (timestamps make 1460
-- into 1448): the option less the options of the last data segment.
function Flow:effective_mss()
  local mss = self.mss
  if mss ~= 0 then
    local o = self.data_options_len
    if o ~= 0 and o < mss then return mss - o end
    if self.largest_payload <= mss and self.largest_payload + 40 >= mss then return self.largest_payload end
    return mss
  end
  -- Without a SYN: full segments (no PSH), unless a multiple of the Ethernet standard (a TSO/GRO
  -- aggregate); else the standard less the options seen (docs/rules.md "MSS").
  local standard = RULES.mss_standard - min(self.data_options_len, 40)
  local full = self.full_min
  if self.full_count >= RULES.mss_full_segments_min and not (full > standard and full % standard == 0) then
    return full
  end
  return standard
end
-- A segment longer than the MSS (a TSO/GRO aggregate) is small when its last wire segment was.
function Flow:is_small(len)
  local m = self:effective_mss()
  return len < m or (len > m and len % m ~= 0)
end
-- How the MSS was found (ConnectionInfo::mss_source_*).
function Flow:mss_source()
  if self.mss ~= 0 then return "handshake" end
  local standard = RULES.mss_standard - min(self.data_options_len, 40)
  local full = self.full_min
  if self.full_count >= RULES.mss_full_segments_min and not (full > standard and full % standard == 0) then
    return "full segments"
  end
  return "Ethernet standard"
end
-- The scale of the peer's windows: known, or the inferred lower bound.
function Flow:peer_wscale(peer_offered, own_offered)
  if not self.peer_wscale_known then return self.peer_wscale_min end
  if peer_offered >= 0 and own_offered >= 0 then return min(peer_offered, 14) end
  return 0
end

-- Without both SYNs the peer's window scale is unknown: the data in flight must have fitted the
-- window the peer last advertised, so the scale is at least what makes it fit.
function Flow:infer_window_scale()
  if self.peer_wscale_known or not self.una_known or self.peer_window_raw == 0 or self.max_end <= self.una then
    return
  end
  local in_flight = self.max_end - self.una
  while self.peer_wscale_min < 14 and self.peer_window_raw * 2 ^ self.peer_wscale_min < in_flight do
    self.peer_wscale_min = self.peer_wscale_min + 1
  end
end

-- A new-data segment without PSH: its sender had more data queued, so it was full.
function Flow:saw_full(len)
  if self.full_min == 0 or len < self.full_min then
    self.full_min, self.full_count = len, 0
  end
  if len == self.full_min then self.full_count = self.full_count + 1 end
end

function Flow:acked(ack, t, frame)
  if self.una_known and ack <= self.una then return false end
  self.una = ack
  self.una_known = true
  self:trim_acked(t, frame)
  return true
end

-- Trims the unacked records una covers (also a segment captured after the ACK that covers it;
-- t and frame: that ACK's).
function Flow:trim_acked(t, frame)
  local ack = self.una
  local u = self.unacked
  while self.ua_head <= self.ua_tail and u[self.ua_head].e <= ack do
    local r = u[self.ua_head]
    if r.h and r.h >= 0 then self.acked_h, self.acked_cmd = r.h, r.cmd end
    self.acked_data_t, self.acked_data_frame = r.t, r.frame
    u[self.ua_head] = nil
    self.ua_head = self.ua_head + 1
  end
  local r = self.ua_head <= self.ua_tail and u[self.ua_head]
  if r and r.s < ack and r.h and r.h >= 0 then self.acked_h, self.acked_cmd = r.h, r.cmd end
  local s = self.last_small
  if self.has_small and not s.acked and ack >= s.e then
    s.acked = true
    s.ack_t = t
    s.ack_frame = frame
  end
end

-- An ACK from the peer that moved the edge of what this side may send (acknowledged more or
-- changed the window): kept a while, since a sender may be released by an ACK older than the
-- latest (the capture point is one side's round trip away from the sender).
local MAX_ACK_RECORDS = 4096
-- The edge an ACK offered (engine: Flow::edge): its window scaled as known, or by the lower bound
-- the data in flight proves now.
function Flow:edge(r)
  return r.ack + (self.peer_wscale_known and r.window or r.raw * 2 ^ self.peer_wscale_min)
end
-- The first kept ACK whose edge takes in `e` (ak_tail + 1: none); edges only grow, so a binary
-- search (engine: Flow::first_opening).
function Flow:first_opening(e)
  local lo, hi = self.ak_head, self.ak_tail + 1
  while lo < hi do
    local mid = lo + floor((hi - lo) / 2)
    if self:edge(self.acks[mid]) < e then lo = mid + 1 else hi = mid end
  end
  return lo
end
-- The first kept ACK record with timestamp `val` (ak_tail + 1: none); timestamps only grow
-- (engine: Flow::first_with_ts).
function Flow:first_with_ts(val)
  local lo, hi = self.ak_head, self.ak_tail + 1
  while lo < hi do
    local mid = lo + floor((hi - lo) / 2)
    local r = self.acks[mid]
    if not r.has_ts or (r.tsval - val) % TWO32 >= 2147483648 then lo = mid + 1 else hi = mid end
  end
  if lo <= self.ak_tail and self.acks[lo].has_ts and self.acks[lo].tsval == val then return lo end
  return self.ak_tail + 1
end
-- The end of a segment's first wire segment (engine: Flow::first_wire_end).
function Flow:first_wire_end(seq, len)
  local mss = self:effective_mss()
  return self:unwrap(seq) + (len < mss and len or mss)
end
-- The link this side's data crosses: the host pair's shared meter, else its own.
function Flow:link_meter() return self.path or self.link end

function Flow:record_ack(r, horizon)
  local a = self.acks
  -- the newest record older than the horizon stays: the edge in force until the next one
  while self.ak_head <= self.ak_tail and ((self.ak_head < self.ak_tail and a[self.ak_head + 1].t < horizon) or
        self.ak_tail - self.ak_head + 1 >= MAX_ACK_RECORDS) do
    a[self.ak_head] = nil
    self.ak_head = self.ak_head + 1
  end
  self.ak_tail = self.ak_tail + 1
  a[self.ak_tail] = r
end

-- Index of the first unacknowledged record whose end is beyond v, or nil.
function Flow:first_unacked_ending_after(v)
  local lo, hi = self.ua_head, self.ua_tail + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if self.unacked[mid].e <= v then lo = mid + 1 else hi = mid end
  end
  if lo <= self.ua_tail then return lo end
  return nil
end

function Flow:push_unacked(rec)
  if self.ua_tail - self.ua_head + 1 >= 65536 then return end
  self.ua_tail = self.ua_tail + 1
  self.unacked[self.ua_tail] = rec
end

function Flow:ooo_first()
  local best
  for k in pairs(self.ooo) do if not best or k < best then best = k end end
  return best
end
