---------------------------------------------------------------------------------------------
-- TCP flow, one direction, its link meter and round-trip estimate (engine/src/tcp/flow.hpp,
-- flow.cpp: Flow, LinkMeter, RttEstimate)

-- The path's rate as the peer's ACKs show it (engine: tcp::LinkMeter, docs/rules.md "The link"):
-- its fastest train of ACKs each under a quarter round trip apart, and the busy time: gaps up to
-- two round trips whose ACK acknowledged data at no less than a quarter of that rate.
local LinkMeter = {}
LinkMeter.__index = LinkMeter

function LinkMeter.new()
  return setmetatable({ last_t = -1, busy_ns = 0, busy_bytes = 0, run_ns = 0, run_bytes = 0, rate = 0,
                        rate_bytes = 0 }, LinkMeter)
end

do
-- (the rules' constants as upvalues: this runs for every ACK that advances)
local TRAIN_DIV, RUN_MIN = RULES.link_train_gap_rtt_divisor, RULES.link_run_bytes_min
local BUSY_RTTS, BUSY_DIV = RULES.link_busy_gap_rtts, RULES.link_busy_rate_divisor
function LinkMeter:advanced(bytes, t, rtt)
  local last = self.last_t
  local gap = last < 0 and -1 or t - last
  self.last_t = t
  if gap < 0 then return end
  local rate = self.rate
  if gap <= floor(rtt / TRAIN_DIV) then
    local run_ns, run_bytes = self.run_ns + gap, self.run_bytes + bytes
    self.run_ns, self.run_bytes = run_ns, run_bytes
    if run_bytes >= RUN_MIN and run_ns > 0 then
      local r = run_bytes * 1e9 / run_ns
      if r > rate then
        rate = r
        self.rate, self.rate_bytes = r, run_bytes
      end
    end
  else
    self.run_ns, self.run_bytes = 0, 0
  end
  if rate > 0 and gap <= rtt * BUSY_RTTS and bytes * 1e9 >= gap * rate / BUSY_DIV then
    self.busy_ns = self.busy_ns + gap
    self.busy_bytes = self.busy_bytes + bytes
  end
end
end

local Flow = {}
Flow.__index = Flow

function Flow.new()
  return setmetatable({ started = false, syn_seen = false, fin_seen = false, next = 0, max_end = 0,
    una = 0, una_known = false, peer_window = 0, peer_window_known = false,
    peer_wscale_known = false, peer_wscale_min = 0, peer_window_raw = 0, wscale_offered = -1, mss = 0,
    mss_from_syn = false, largest_payload = 0, full_min = 0, full_count = 0, aggregates = 0, aggregates_whole = 0, data_options_len = 0, has_small = false, last_small = nil, nagle_off_frame = 0, data_segments = 0, last_resend_t = nil,
    last_data_t = 0, last_data_frame = 0, has_last_data = false,
    unacked = {}, ua_head = 1, ua_tail = 0, ua_free = {}, ua_free_n = 0, out_of_order = {}, out_of_order_count = 0, out_of_order_bytes = 0,
    hole_since = 0, bytes_missing = 0, ref = 0, acked_h = -1, acked_cmd = 0, acked_data_t = 0,
    acked_data_frame = 0, unseen_upto = 0, unseen_t = 0, unseen_frame = 0,
    acks = {}, ak_head = 1, ak_tail = 0, ak_free = {}, ak_free_n = 0,
    -- this side's recent timestamps at first sight; its latest data segment's echo (engine: Flow)
    ts_firsts = {}, tsf_head = 1, tsf_tail = 0, last_payload_t = -math.huge,
    data_echo = 0, data_echo_seen = false, echo_moved_frame = 0,
    link = LinkMeter.new() },
    Flow)
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

-- A queue's records head..tail moved to 1.. once more were dropped than are kept (or none is):
-- the keys stay small, in Lua's array part, instead of advancing through its hash (a rehash, a
-- new node array, every few records). Returns the new head and tail; indexes are read only within
-- a call.
local function compact(a, head, tail)
  if head > tail then return 1, 0 end
  if head <= 32 or head <= tail - head + 1 then return head, tail end
  local n = 0
  for i = head, tail do
    n = n + 1
    a[n] = a[i]
    a[i] = nil
  end
  return 1, n
end

-- Trims the unacked records una covers (also a segment captured after the ACK that covers it;
-- t and frame: that ACK's).
function Flow:trim_acked(t, frame)
  local ack = self.una
  local u = self.unacked
  local head, tail = self.ua_head, self.ua_tail
  if head <= tail and u[head].e <= ack then
    local free, n = self.ua_free, self.ua_free_n  -- to be refilled (tcp/tracker.lua)
    repeat
      local r = u[head]
      local h = r.h
      if h and h >= 0 then self.acked_h, self.acked_cmd = h, r.cmd end
      self.acked_data_t, self.acked_data_frame = r.t, r.frame
      u[head] = nil
      head = head + 1
      n = n + 1
      free[n] = r
    until head > tail or u[head].e > ack
    self.ua_free_n = n
  end
  head, tail = compact(u, head, tail)
  self.ua_head, self.ua_tail = head, tail
  local r = head <= tail and u[head]
  if r and r.s < ack and r.h and r.h >= 0 then self.acked_h, self.acked_cmd = r.h, r.cmd end
  if self.has_small then
    local s = self.last_small
    if not s.acked and ack >= s.e then
      s.acked = true
      s.ack_t = t
      s.ack_frame = frame
    end
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
  local a, known, scale = self.acks, self.peer_wscale_known, 2 ^ self.peer_wscale_min
  local lo, hi = self.ak_head, self.ak_tail + 1
  while lo < hi do
    local mid = lo + floor((hi - lo) / 2)
    local r = a[mid]  -- (edge written out: a call per step)
    if r.ack + (known and r.window or r.raw * scale) < e then lo = mid + 1 else hi = mid end
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

-- Returns the new record, for the caller to fill: one dropped here is refilled (no table per ACK;
-- no record is kept past the call that reads it).
function Flow:record_ack(horizon)
  local a = self.acks
  local free, n = self.ak_free, self.ak_free_n
  local head, tail = self.ak_head, self.ak_tail
  -- the newest record older than the horizon stays: the edge in force until the next one
  while head <= tail and ((head < tail and a[head + 1].t < horizon) or tail - head + 1 >= MAX_ACK_RECORDS) do
    n = n + 1
    free[n] = a[head]
    a[head] = nil
    head = head + 1
  end
  head, tail = compact(a, head, tail)
  local r
  if n > 0 then
    r = free[n]
    free[n] = nil
    n = n - 1
  else
    r = { ack = 0, t = 0, frame = 0, window = 0, h = -1, cmd = 0, data_t = 0, data_frame = 0, raw = 0, tsval = 0,
          has_ts = false, out_of_flight = 0 }
  end
  self.ak_free_n = n
  tail = tail + 1
  self.ak_head, self.ak_tail = head, tail
  a[tail] = r
  return r
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

-- The first held start (engine: out_of_order.begin()->first, a std::map's; a Lua table has no
-- order).
function Flow:out_of_order_first()
  local best
  for k in pairs(self.out_of_order) do if not best or k < best then best = k end end
  return best
end

---------------------------------------------------------------------------------------------
-- Minimum-filtered round-trip estimate between the capture point and one side, and the path's
-- jitter (engine: tcp::RttEstimate, docs/rules.md "Holds"). Fields ending in "_" are the C++
-- class's private members: read them through the methods.
local RttEstimate = {}
RttEstimate.__index = RttEstimate

function RttEstimate.new()
  return setmetatable({ min_ = 0, known_ = false, handshake_ = false, released_ = false, samples_ = 0,
                        clean_samples_ = 0, ring_ = 0, recent_ = {}, sorted_ = {}, nan_ = false,
                        nagle_bound_ = false, prompt_samples_ = 0, nagle_ = {}, nagle_count_ = 0,
                        min_clean_ = false }, RttEstimate)
end

-- A copy (the engine copies the value: a scout's estimate seeds a connection's).
function RttEstimate:copy()
  local r = setmetatable({}, RttEstimate)
  for k, v in pairs(self) do r[k] = v end
  r.recent_, r.sorted_, r.nagle_ = {}, {}, {}
  for k, v in pairs(self.recent_) do r.recent_[k] = v end
  for k, v in pairs(self.sorted_) do r.sorted_[k] = v end
  for k, v in pairs(self.nagle_) do r.nagle_[k] = { v[1], v[2] } end
  return r
end

local RTT_MAX_NS = RULES.rtt_max_ms * 1e6
-- A sample into the ring of the latest jitter_window, and into sorted_, the same values in
-- order. Once the ring is full the value it replaces is found by binary search and the new one
-- moved from there to its place (consecutive samples are close: few moves); no sort per sample.
-- (A local function: sample and released call it per ACK.)
local JITTER_WINDOW = RULES.jitter_window
local function remember(self, ns)
  local w = JITTER_WINDOW
  local ring = self.ring_
  local k = ring % w + 1
  local s, recent = self.sorted_, self.recent_
  if ring >= w and not self.nan_ and ns == ns then
    local old = recent[k]
    local lo, hi = 1, w
    while lo < hi do
      local mid = floor((lo + hi) / 2)
      if s[mid] < old then lo = mid + 1 else hi = mid end
    end
    local i = lo
    if ns > old then
      while i < w do
        local nx = s[i + 1]
        if nx >= ns then break end
        s[i] = nx
        i = i + 1
      end
    else
      while i > 1 do
        local pv = s[i - 1]
        if pv <= ns then break end
        s[i] = pv
        i = i - 1
      end
    end
    s[i] = ns
  else
    -- (filling, or after a NaN, which equals nothing and breaks the order: a scan)
    if ns ~= ns then self.nan_ = true end
    local n = #s
    if ring >= w then
      local old = recent[k]
      local i = n
      while i > 0 and s[i] ~= old do i = i - 1 end
      if i > 0 then
        for j = i, n - 1 do s[j] = s[j + 1] end
        s[n] = nil
        n = n - 1
      end
    end
    local i = n
    while i > 0 and s[i] > ns do
      s[i + 1] = s[i]
      i = i - 1
    end
    s[i + 1] = ns
  end
  recent[k] = ns
  self.ring_ = ring + 1
end
RttEstimate.remember = remember
-- clean: the ACK carried no data (a pure ACK or the handshake), so the sample holds no answer
-- time of the side's application; prompt: nor a delayed-ACK timer's or a late read's wait (a
-- handshake, or a pure ACK of more than one full segment). nil: true, as the engine's defaults.
function RttEstimate:sample(ns, from_handshake, clean, prompt)
  -- past TCP's longest retransmission timeout a gap is not a round trip
  if ns < 0 or ns > RTT_MAX_NS then return end
  if from_handshake then self.handshake_ = true end
  if clean ~= false then
    self.clean_samples_ = self.clean_samples_ + 1
    if prompt ~= false then self.prompt_samples_ = self.prompt_samples_ + 1 end
  end
  if not self.known_ or ns < self.min_ then self.min_, self.nagle_bound_, self.min_clean_ = ns, false, clean ~= false end
  self.known_ = true
  self.samples_ = self.samples_ + 1
  remember(self, ns)
end
function RttEstimate:known() return self.known_ end
function RttEstimate:ns() return self.known_ and self.min_ or 0 end
function RttEstimate:samples() return self.samples_ end
function RttEstimate:clean_samples() return self.clean_samples_ end
function RttEstimate:from_handshake() return self.handshake_ end
-- Data the side sent after the pure ACK whose timestamp it echoes (Tracker:echo): a release, so
-- the path's spread too; not counted as a sample of the ACKs.
function RttEstimate:released(ns)
  if ns < 0 or ns > RTT_MAX_NS then return end
  if not self.known_ or ns <= self.min_ then self.min_, self.released_ = ns, true end
  self.known_ = true
  remember(self, ns)
end
-- A short segment that followed the side's previous short one and left `after` the pure ACK of
-- that one, `since` after it (engine: RttEstimate::nagle_release, docs/rules.md "Nagle releases"):
-- the least delay after the ACK that enough releases share, within a band, while the time since the
-- previous short segment varied between them by more than the path could, bounds rtt(S).
local NR_WINDOW, NR_MIN = RULES.nagle_release_window, RULES.nagle_release_samples_min
local NR_BAND = floor(RULES.nagle_release_band_ms * 1e6 + 0.5)
local NR_DIV = RULES.nagle_release_band_divisor
local NR_SPREAD = floor(RULES.nagle_release_spread_ms * 1e6 + 0.5)
function RttEstimate:nagle_release(after, since)
  if after < 0 or after > RTT_MAX_NS then return false end
  local c = self.nagle_count_
  self.nagle_[c % NR_WINDOW + 1] = { after, since }
  c = c + 1
  self.nagle_count_ = c
  local n = min(c, NR_WINDOW)
  if n < NR_MIN then return false end
  local v = {}
  for i = 1, n do v[i] = self.nagle_[i] end
  table.sort(v, function(a, b) return a[1] < b[1] end)  -- by `after`: ties leave the result alone
  for i = 1, n - NR_MIN + 1 do
    local d = v[i][1]
    local top = d + NR_BAND + floor(d / NR_DIV)
    local lo, hi = v[i][2], v[i][2]
    local k, j = 0, i
    while j <= n and v[j][1] <= top do
      local g = v[j][2]
      if g < lo then lo = g end
      if g > hi then hi = g end
      j, k = j + 1, k + 1
    end
    if k >= NR_MIN and hi - lo > NR_SPREAD then
      if self.known_ and d >= self.min_ then return false end
      self.min_, self.known_, self.nagle_bound_ = d, true, true
      return true
    end
  end
  return false
end
-- Not only an upper bound that may hold the side's answer time or a delayed ACK.
function RttEstimate:tight() return self.handshake_ or self.prompt_samples_ > 0 or self.released_ end
-- Only an upper bound: neither tight nor from Nagle releases (those time holds, never prove).
function RttEstimate:upper_bound_only() return not self:tight() and not self.nagle_bound_ end
-- Only an upper bound whose least sample was a pure ACK: it may hold a delayed-ACK timer's wait.
function RttEstimate:bound_by_pure_acks() return self:upper_bound_only() and self.min_clean_ end
-- Only an upper bound that may hold the side's own time: its answers (ACKs on data) or a
-- delayed-ACK timer's wait (pure ACKs as late as one).
function RttEstimate:may_hold_side_time(delayed_ack_min_ns)
  return self:upper_bound_only() and (not self.min_clean_ or self.min_ >= delayed_ack_min_ns)
end
-- Where the estimate comes from (docs/rules.md "Joined connections").
function RttEstimate:source()
  if self.handshake_ then return "handshake" end
  if self.released_ then return "echoed timestamps" end
  if self.prompt_samples_ > 0 then return "pure ACKs" end
  if self.nagle_bound_ then return "Nagle releases" end
  if self.clean_samples_ > 0 then return "pure ACKs that may be delayed" end
  if self.samples_ > 0 then return "ACKs on data" end
  return ""
end
-- The jitter percentile of the latest samples' excess over the minimum, excesses beyond
-- jitter_excess_max_ms (or half the minimum) left out (delayed ACKs); 0 with too few.
-- (The caller bounds it by the RTT: on a LAN the excess is think time, not jitter.)
function RttEstimate:jitter_ns(percentile)
  -- The excesses in order are the sorted samples less the minimum, those within the cap a prefix.
  local cap = max(floor(RULES.jitter_excess_max_ms * 1e6 + 0.5), floor(self.min_ / RULES.jitter_rtt_divisor))
  local s, m = self.sorted_, self.min_
  local n = #s
  while n > 0 and s[n] - m > cap do n = n - 1 end
  if n < RULES.jitter_samples_min then return 0 end
  return s[floor((n - 1) * (percentile or RULES.jitter_percentile) / 100) + 1] - m
end
