---------------------------------------------------------------------------------------------
-- Analyzer: the connection table (engine/src/analyzer.cpp) and the results per frame.

local Analyzer = {}
Analyzer.__index = Analyzer

-- Entries by connection, at most max: a new one evicts the oldest (insertion order); the order drops
-- the keys removed since once it reaches twice the bound (the engine's OldestFirst).
local OldestFirst = {}
OldestFirst.__index = OldestFirst
function OldestFirst.new()
  return setmetatable({ entries = {}, count = 0, order = {}, head = 1, tail = 0 }, OldestFirst)
end
function OldestFirst:insert(key, value, max)
  while self.count >= max and self.head <= self.tail do
    local old = self.order[self.head]
    self.order[self.head] = nil
    self.head = self.head + 1
    if self.entries[old] then
      self.entries[old] = nil
      self.count = self.count - 1
    end
  end
  if self.tail - self.head + 1 >= 2 * max then
    local order, n = {}, 0
    for k = self.head, self.tail do
      local x = self.order[k]
      if self.entries[x] then n = n + 1; order[n] = x end
    end
    self.order, self.head, self.tail = order, 1, n
  end
  self.tail = self.tail + 1
  self.order[self.tail] = key
  self.entries[key] = value
  self.count = self.count + 1
end
-- (the engine erases from its std::map entries)
function OldestFirst:erase(key)
  if self.entries[key] then
    self.entries[key] = nil
    self.count = self.count - 1
  end
end

function Analyzer.new(options)
  local a = setmetatable({ options = options or DEFAULT_OPTIONS, live = {}, live_count = 0,
    connections = {}, next_id = 1, registry = SessionRegistry.new(),
    findings = {}, commands = {}, by_evidence = {}, by_decision = {}, by_status = {},
    cmd_by_decision = {},
    cur_frame = 0, finished = false, last_frame = 0,
    pending = OldestFirst.new(),
    closing = {}, cl_head = 1, cl_tail = 0, last_idle_scan = nil, refused = {}, refused_count = 0,
    segments = 0, scan_segments = 0, probation = {}, probation_count = 0, probation_bytes = 0,
    sniffing = OldestFirst.new(), not_iscsi = {}, not_iscsi_count = 0,
    detected = {} }, Analyzer)
  a.sessions = a.registry:all()  -- (the registry's list: sessions join it in place)
  return a
end

-- A connection joined mid-stream (no handshake) is judged once its round trips are known
-- (docs/rules.md "Joined connections"): its first segments are held while a scout (the same
-- analysis, its results discarded) measures them, then fed to the connection, seeded with the
-- round trips the scout measured and the digests its framing detected (engine/src/analyzer.cpp).
local function noop() end
local DISCARD = { on_command = noop, on_finding = noop }  -- a scout's sink

function Analyzer:probation_over(pr, now)
  local function enough(d)
    local r = pr.scout:rtt(d)
    return r:samples() >= RULES.probation_rtt_samples and r:clean_samples() > 0 and not r:upper_bound_only()
  end
  return (enough(0) and enough(1)) or #pr.held >= RULES.probation_segments_max or
         pr.bytes >= RULES.probation_bytes_max or now - pr.held[1].seg.t >= RULES.probation_ms * 1e6 or
         self.probation_bytes > RULES.probation_bytes_all_max
end

function Analyzer:end_probation(key, c)
  local pr = self.probation[key]
  if not pr then return end
  self.probation[key] = nil
  self.probation_count = self.probation_count - 1
  self.probation_bytes = self.probation_bytes - pr.bytes
  for d = 0, 1 do
    if pr.scout:rtt(d):known() then c:seed_rtt(d, pr.scout:rtt(d)) end
    c:seed_digests(d, pr.scout:header_digest_seen(d), pr.scout:data_digest_seen(d))
  end
  for _, h in ipairs(pr.held) do c:on_segment(h.seg, h.dir) end
end

function Analyzer:last_t(key, c)
  local pr = self.probation[key]
  if pr and #pr.held > 0 then return pr.held[#pr.held].seg.t end
  return c.last_t
end

-- Memory follows what is open: a closed connection is finished once its last segments (final
-- ACK, a resent FIN) have had time to pass (engine/src/analyzer.cpp).
function Analyzer:finish_closed(now)
  while self.cl_head <= self.cl_tail and self.closing[self.cl_head].due < now do
    local e = self.closing[self.cl_head]
    self.closing[self.cl_head] = nil
    self.cl_head = self.cl_head + 1
    local c = self.live[e.key]
    if c and c.id == e.id then
      self:end_probation(e.key, c)
      c:finish()
      self.live[e.key] = nil
      self.live_count = self.live_count - 1
    end
  end
end

-- At the connection cap: connections idle past the timeout are finished (one scan per half timeout).
function Analyzer:finish_idle(now)
  local timeout = self.options.idle_timeout_s * 1e9
  if self.last_idle_scan and (now - self.last_idle_scan < timeout / 2 or
     self.segments - self.scan_segments < self.live_count) then return end
  self.last_idle_scan = now
  self.scan_segments = self.segments
  local idle = {}
  for key, c in pairs(self.live) do
    if now - self:last_t(key, c) >= timeout then idle[#idle + 1] = { id = c.id, key = key } end
  end
  table.sort(idle, function(a, b) return a.id < b.id end)
  for _, e in ipairs(idle) do
    self:end_probation(e.key, self.live[e.key])
    self.live[e.key]:finish()
    self.live[e.key] = nil
    self.live_count = self.live_count - 1
  end
end

-- Handshakes on ports not known to be iSCSI, kept until a Login Request shows the connection is
-- (then replayed into it: MSS, window scale and round trips come from them).
local MAX_PENDING_HANDSHAKES = 4096
function Analyzer:remember_handshake(key, seg, syn)
  local p = self.pending.entries[key]
  if syn then
    p = {}
    if self.pending.entries[key] then self.pending.entries[key] = p else self.pending:insert(key, p, MAX_PENDING_HANDSHAKES) end
  elseif not p or #p >= 3 then
    return
  end
  local copy = {}
  for k, v in pairs(seg) do copy[k] = v end
  copy.pay_len = 0
  p[#p + 1] = copy
end

local function push(t, k, v)
  local l = t[k]
  if not l then l = {}; t[k] = l end
  l[#l + 1] = v
end

function Analyzer:on_finding(f)
  f.decided_frame = self.cur_frame
  f.fix = fix_for(f.kind, f.side)
  self.findings[#self.findings + 1] = f
  push(self.by_evidence, f.frame, f)
  push(self.by_decision, self.cur_frame, f)
end

function Analyzer:on_command(c)
  self.commands[#self.commands + 1] = c
  if c.completed then
    push(self.by_status, c.status_frame, c)
    push(self.cmd_by_decision, self.cur_frame, c)
  end
end

-- The engine orders its connection table by (lower endpoint, higher endpoint), an endpoint by
-- its 16 address bytes (IPv4 in the first 4), then IPv6 or not, then port; finish() goes
-- through it in that order. As a string of hex digits that sorts the same way.
local function endpoint_order(ep)
  local addr, port = ep:match("^%[?(.-)%]?:(%d+)$")
  if not addr then return ep end
  local bytes, v6 = {}, addr:find(":", 1, true) ~= nil
  local v4 = addr:match("(%d+%.%d+%.%d+%.%d+)$")
  local tail = {}
  if v4 then
    for n in v4:gmatch("%d+") do tail[#tail + 1] = tonumber(n) % 256 end
    addr = addr:sub(1, #addr - #v4)
  end
  if v6 then
    local head, rest = addr, nil
    local dc = addr:find("::", 1, true)
    if dc then head, rest = addr:sub(1, dc - 1), addr:sub(dc + 2) end
    local function groups(s)
      local g = {}
      for h in s:gmatch("[^:]+") do g[#g + 1] = tonumber(h, 16) or 0 end
      return g
    end
    local hg, rg = groups(head), rest and groups(rest) or {}
    local n = #hg + #rg + #tail / 2
    for _, v in ipairs(hg) do bytes[#bytes + 1] = floor(v / 256); bytes[#bytes + 1] = v % 256 end
    for _ = n + 1, 8 do bytes[#bytes + 1] = 0; bytes[#bytes + 1] = 0 end
    for _, v in ipairs(rg) do bytes[#bytes + 1] = floor(v / 256); bytes[#bytes + 1] = v % 256 end
  end
  for _, v in ipairs(tail) do bytes[#bytes + 1] = v end
  local out = {}
  for i = 1, 16 do out[i] = string.format("%02x", bytes[i] or 0) end
  return table.concat(out) .. (v6 and "1" or "0") .. string.format("%04x", tonumber(port) % 65536)
end

-- Connections on ports not known to be iSCSI, joined mid-session, whose first payload began with
-- a plausible PDU header: held while their PDUs' structure is judged (StreamDetector), then
-- replayed as iSCSI, or forgotten (engine/src/analyzer.cpp, Impl::sniff).
local SNIFFED_MAX, SNIFFED_BYTES_MAX, NOT_ISCSI_MAX = 8, 2 * 1048576, 65536

function Analyzer:give_up(key)
  self.sniffing:erase(key)
  if self.not_iscsi_count >= NOT_ISCSI_MAX then self.not_iscsi, self.not_iscsi_count = {}, 0 end
  if not self.not_iscsi[key] then
    self.not_iscsi[key] = true
    self.not_iscsi_count = self.not_iscsi_count + 1
  end
end

function Analyzer:sniff(key, seg)
  local s = self.sniffing.entries[key]
  if not s then
    if self.not_iscsi[key] or not StreamDetector.starts_with_header(payload_of(seg)) then return end
    s = { detector = StreamDetector.new(), side0 = seg.src, side1 = seg.dst, held = {}, h_head = 1, h_tail = 0,
          bytes = 0 }
    self.sniffing:insert(key, s, SNIFFED_MAX)
  end
  local copy = {}
  for k, v in pairs(seg) do copy[k] = v end
  s.h_tail = s.h_tail + 1
  s.held[s.h_tail] = copy
  s.bytes = s.bytes + seg.pay_len + RULES.probation_segment_cost
  while s.bytes > SNIFFED_BYTES_MAX and s.h_tail > s.h_head do
    s.bytes = s.bytes - s.held[s.h_head].pay_len - RULES.probation_segment_cost
    s.held[s.h_head] = nil
    s.h_head = s.h_head + 1
  end
  local v = s.detector:feed(seg.src == s.side0 and 0 or 1, payload_of(seg))
  if v == "not_iscsi" then self:give_up(key) return end
  if v == "undecided" then return end
  self.detected[key] = s.detector.initiator_side == 0 and s.side1 or s.side0
  self.sniffing:erase(key)
  for i = s.h_head, s.h_tail do
    local h = s.held[i]
    h.key = key
    self:feed(h)
  end
end

local function looks_like_login(seg)
  if seg.pay_len < 48 or seg.pkt:byte(seg.pay) ~= 0x43 then return false end
  return plausible_bhs(parse_bhs(seg.pkt, seg.pay), true)
end

-- seg: frame, t (ns, any origin), src, dst (endpoint strings), sport, dport, seq, ack, flags,
-- window, mss, wscale, pkt, pay, pay_len (the captured payload: payload_of), wire_len; key, the connection's (made here when
-- absent: PacketDecoder caches it)
function Analyzer:feed(seg)
  self.cur_frame = seg.frame
  self.last_frame = self.last_frame > seg.frame and self.last_frame or seg.frame
  local key = seg.key or (seg.src < seg.dst and (seg.src .. "|" .. seg.dst) or (seg.dst .. "|" .. seg.src))
  self.segments = self.segments + 1
  if self.cl_head <= self.cl_tail then self:finish_closed(seg.t) end
  local c = self.live[key]
  local fl = seg.flags
  local syn = fl % 4 >= 2 and fl % 32 < 16  -- SYN without ACK
  -- A SYN-ACK after the close answers a SYN the capture missed (RFC 9293 3.5): a new connection
  -- (not one with a FIN or RST too: no peer sends that).
  if c and (syn or fl % 8 == 2) and (c:closed() or (self.probation[key] and self.probation[key].scout:closed())) then
    self:end_probation(key, c)
    c:finish()
    self.live[key] = nil
    self.live_count = self.live_count - 1
    c = nil
  end
  if not c then
    local opt = self.options
    if not opt.ports[seg.dport] and not opt.ports[seg.sport] and opt.detect_ports and seg.wire_len == 0 and
       (hasbit(seg.flags, 0x02) or hasbit(seg.flags, 0x10)) then
      self:remember_handshake(key, seg, syn)
    end
    -- A connection whose PDUs are being judged keeps every segment (its ACKs time its path).
    local known_port = opt.ports[seg.dport] or opt.ports[seg.sport]
    if not known_port and not syn and self.sniffing.count > 0 and self.sniffing.entries[key] then return self:sniff(key, seg) end
    if not syn and seg.wire_len == 0 then return end
    -- A connection the cap refused stays unanalysed until its 4-tuple starts anew (SYN).
    if self.refused[key] then
      if not syn then return end
      self.refused[key] = nil
      self.refused_count = self.refused_count - 1
    end
    local ini, tgt
    if opt.ports[seg.dport] then ini, tgt = seg.src, seg.dst
    elseif opt.ports[seg.sport] then ini, tgt = seg.dst, seg.src
    elseif opt.detect_ports and not syn and looks_like_login(seg) then ini, tgt = seg.src, seg.dst
    elseif self.detected[key] then
      if seg.src == self.detected[key] then ini, tgt = seg.dst, seg.src else ini, tgt = seg.src, seg.dst end
    end
    if not ini then
      if not known_port and opt.detect_ports and not syn and seg.pay_len > 0 then return self:sniff(key, seg) end
      return
    end
    self.detected[key] = nil
    if self.live_count >= opt.max_connections then self:finish_idle(seg.t) end
    if self.live_count >= opt.max_connections then
      if self.refused_count >= 65536 then self.refused, self.refused_count = {}, 0 end
      self.refused[key] = true
      self.refused_count = self.refused_count + 1
      return
    end
    c = Connection.new(self.next_id, ini, tgt, opt, self, self.registry)
    c.key = key
    local a, b = endpoint_order(ini), endpoint_order(tgt)
    c.table_order = a < b and (a .. b) or (b .. a)
    self.next_id = self.next_id + 1
    self.live[key] = c
    self.live_count = self.live_count + 1
    self.connections[#self.connections + 1] = c
    local p = self.pending.entries[key]
    if p then
      for _, h in ipairs(p) do c:on_segment(h, h.src == ini and I2T or T2I) end
      self.pending:erase(key)
    elseif not syn and self.probation_count < RULES.probation_connections_max then
      self.probation[key] = { scout = Connection.new(c.id, ini, tgt, opt, DISCARD, SessionRegistry.new()), held = {},
                              bytes = 0 }
      self.probation_count = self.probation_count + 1
    end
  end
  local dir = seg.src == c.initiator and I2T or T2I
  local pr = self.probation[key]
  if pr then
    local was_closed = pr.scout:closed()
    pr.scout:on_segment(seg, dir)
    -- Closed, it is finished (and its probation ended) after the linger: the final ACK of the
    -- FIN may be the first round-trip sample free of the peer's answer time.
    if pr.scout:closed() and not was_closed then
      self.cl_tail = self.cl_tail + 1
      self.closing[self.cl_tail] = { due = seg.t + pr.scout:linger_ns(), key = key, id = c.id }
    end
    local copy = {}
    for k, v in pairs(seg) do copy[k] = v end
    pr.held[#pr.held + 1] = { seg = copy, dir = dir }
    local cost = seg.pay_len + RULES.probation_segment_cost
    pr.bytes = pr.bytes + cost
    self.probation_bytes = self.probation_bytes + cost
    if self:probation_over(pr, seg.t) then self:end_probation(key, c) end
    return
  end
  local tcp = c.tcp  -- (c:closed(), written out: per segment)
  local was_closed = tcp.closed_
  c:on_segment(seg, dir)
  if tcp.closed_ and not was_closed then
    self.cl_tail = self.cl_tail + 1
    self.closing[self.cl_tail] = { due = seg.t + c:linger_ns(), key = key, id = c.id }
  end
end

function Analyzer:finish()
  if self.finished then return end
  self.finished = true
  self.cur_frame = self.last_frame
  local list = {}
  for _, c in pairs(self.live) do list[#list + 1] = c end
  table.sort(list, function(a, b) return a.table_order < b.table_order end)
  for _, c in ipairs(list) do
    self:end_probation(c.key, c)
    c:finish()
  end
end
