---------------------------------------------------------------------------------------------
-- Streaming framer (engine/src/iscsi/framer.cpp). Events go to `sink`:
--   sink:on_pdu_start(bhs, first_abs), sink:on_pdu_end(bhs, first_abs, kept, data_incomplete,
--   truncated), sink:on_sync_lost().
-- Unconfirmed framing (a SCSI Command found by scanning inside a chunk) is held until it chains:
-- the engine's emit_start, emit_end, confirm.

local Framer = {}
Framer.__index = Framer
local CARRY, PROBE = 47, 52

function Framer.new(from_initiator)
  local f = setmetatable({ from_initiator = from_initiator, hd = "unknown", dd = "unknown",
    next_abs = 0, chunk_base = 0, chunk_end = 0, carry = "", carry_abs = 0, candidate = false,
    login_possible = true, max_dl = MAX_DATA_SEGMENT, pdus = 0, resyncs = 0, digest_bad = false,
    unconfirmed = false, strict_next = false, fresh = true, at_chunk_start = false, held = {},
    bhs_free = {} },  -- headers whose PDU's end was read (PduStream), to refill
    Framer)
  f:reset_pdu()
  return f
end

-- max_dl: a longer DataSegmentLength is taken as lost framing (then resync).
function Framer:set_digests(h, d, max_dl)
  self.login_possible = false  -- digests are settled when login is over
  self.hd = h and "on" or "off"
  self.dd = d and "on" or "off"
  self.max_dl = max_dl or MAX_DATA_SEGMENT
end

function Framer:reset_pdu()
  self.state = "header"
  self.hdr = ""
  self.bhs = nil
  self.started = false
  self.hdr_need = 48
  self.tail = ""
  self.tail_lost = false
  self.keep = ""
end

-- What an earlier look at the same stream detected (a joined connection: see Analyzer), taken as
-- detected here; a setting already known stays (engine/src/iscsi/framer.cpp).
function Framer:seed_digests(h, d)
  if h ~= nil and self.hd == "unknown" then self.hd = h and "on" or "off" end
  if d ~= nil and self.dd == "unknown" then self.dd = d and "on" or "off" end
end

function Framer:start_unsynced()
  self.login_possible = false
  self.fresh = false
  self:drop_held()
  self:reset_pdu()
  self.state = "scan"
  self.candidate = false
  self.carry = ""
end

function Framer:push_back(bytes, abs)
  self.pushback = bytes
  self.pushback_abs = abs
end

-- The chunk: s's n bytes from position i (a frame's string, read in place).
function Framer:feed(s, i, n, sink)
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs + n
  self.next_abs = self.chunk_end
  self:run(s, i, i + n - 1, self.chunk_base)
end

-- s's bytes i..e, the first at stream offset base; each step reads up to e.
function Framer:run(s, i, e, base)
  local i0 = i
  while true do
    if self.pushback then
      s = self.pushback .. s:sub(i, e)
      base = self.pushback_abs
      i, i0, e = 1, 1, #s
      self.pushback = nil
    end
    if i > e then break end
    i = i + self:step(s, i, e, base + i - i0)
  end
end

function Framer:step(s, i, e, abs)
  local st = self.state
  if st == "scan" then return self:step_scan(s, i, e, abs)
  elseif st == "header" then return self:step_header(s, i, e, abs)
  elseif st == "data" then return self:step_data(s, i, e, abs)
  elseif st == "data_digest" then return self:step_data_digest(s, i, e, abs)
  else return self:step_probe(s, i, e, abs, false) end
end

function Framer:candidate_at(s, p)
  local b0 = s:byte(p)
  if b0 >= 0x80 then return false end
  local op = b0 % 64
  if not OPNAMES[op] or is_initiator_opcode(op) ~= self.from_initiator then return false end
  -- Login happens once, first: after Full Feature Phase PDUs a "Login" header is payload.
  if not self.login_possible and not pdu_carries_digests(op) then return false end
  return plausible_bhs(parse_bhs(s, p), self.from_initiator, self.max_dl)
end

function Framer:enter_candidate(at)
  self:reset_pdu()
  self.candidate = true
  self.pdu_abs = at
  self.at_chunk_start = at == self.chunk_base and at < self.chunk_end
end

function Framer:step_scan(s, i, e, abs)
  local nin = e - i + 1
  local carry = self.carry
  if #carry > 0 then
    local take = min(nin, CARRY)
    local win = carry .. s:sub(i, i + take - 1)
    local p = 1
    while p <= #carry and p + 47 <= #win do
      if self:candidate_at(win, p) then
        local head = carry:sub(p)
        local at = self.carry_abs + p - 1
        self.carry = ""
        self:enter_candidate(at)
        self.hdr = head
        return 0
      end
      p = p + 1
    end
    if #carry - 1 + 48 <= #win then
      self.carry = ""
      return 0
    end
    carry = carry .. s:sub(i, e)
    if #carry > CARRY then
      local drop = #carry - CARRY
      carry = carry:sub(drop + 1)
      self.carry_abs = self.carry_abs + drop
    end
    self.carry = carry
    return nin
  end
  local p = i
  local last = e - 47
  while p <= last do
    if self:candidate_at(s, p) then
      self:enter_candidate(abs + (p - i))
      return p - i
    end
    p = p + 1
  end
  local keep = min(nin, CARRY)
  self.carry = s:sub(e - keep + 1, e)
  self.carry_abs = abs + (nin - keep)
  return nin
end

function Framer:step_header(s, i, e, abs)
  if #self.hdr == 0 then
    self.pdu_abs = abs
    if not self.candidate then self.at_chunk_start = abs == self.chunk_base and abs < self.chunk_end end
  end
  local nin = e - i + 1
  local take = min(nin, self.hdr_need - #self.hdr)
  self.hdr = self.hdr .. s:sub(i, i + take - 1)
  if #self.hdr < self.hdr_need then return take end
  if not self.bhs then
    local free = self.bhs_free
    local n = #free
    local b
    if n > 0 then
      b = parse_bhs(self.hdr, 1, free[n])
      free[n] = nil
    else
      b = parse_bhs(self.hdr)
    end
    self.bhs = b
    -- A stream's first header, and the one after a PDU found by searching, pass the strict checks.
    local strict = self.candidate or self.fresh or self.strict_next
    self.fresh, self.strict_next = false, false
    if not plausible_bhs(b, self.from_initiator, self.max_dl, strict and true or false) then
      if self.candidate then
        self:reject_candidate()
      else
        local at = self.pdu_abs
        local rest = self.hdr:sub(2)
        self:reset_pdu()
        self:lose_sync(at)
        self:push_back(rest, at + 1)
      end
      return take
    end
    if self.unconfirmed and not self.candidate then self:confirm() end  -- it chains with this one
    self.hd_this = pdu_carries_digests(b.opcode) and self.hd ~= "off"
    self.hdr_need = header_length(b, self.hd_this)
    if #self.hdr < self.hdr_need then return take end
  end
  self:header_complete()
  return take
end

function Framer:reject_candidate()
  local at = self.pdu_abs + 1
  local rest = self.hdr:sub(2)
  self:reset_pdu()
  self.candidate = false
  self.state = "scan"
  self:push_back(rest, at)
end

function Framer:header_complete()
  local b = self.bhs
  local hlen = header_length(b, false)
  self.digest_bad = false
  if self.hd_this then
    local c = crc32c_final(crc32c_update(crc32c_init(), self.hdr, 1, hlen))
    local match = c == digest_from_wire(self.hdr, hlen + 1)
    if self.hd == "on" then
      if not match and self.candidate then
        self:reject_candidate()
        return
      end
      self.digest_bad = not match
    elseif match then
      self.hd = "on"
    else
      if not self.candidate then self.hd = "off" end
      self.hd_this = false
      self:push_back(self.hdr:sub(hlen + 1, hlen + 4), self.pdu_abs + hlen)
      self.hdr = self.hdr:sub(1, hlen)
    end
  end
  if self.candidate then
    self.candidate = false
    self.strict_next = true
    -- Senders begin PDUs at a segment's start: a command found inside one is held until it chains.
    self.unconfirmed = not self.at_chunk_start and b.opcode == 0x01
    self.held = {}
    self.resyncs = self.resyncs + 1
  end
  self.started = true
  if pdu_carries_digests(b.opcode) then self.login_possible = false end
  if self.unconfirmed then
    local h = self.held
    h[#h + 1] = { b, self.pdu_abs }
  else
    self.sink:on_pdu_start(b, self.pdu_abs)
  end
  self:begin_data()
end

function Framer:begin_data()
  local b = self.bhs
  local dl = b.data_length
  self.data_left = dl
  self.pad_left = pad4(dl) - dl
  self.crc = crc32c_init()
  self.crc_valid = true
  self.data_incomplete = false
  self.keep = ""
  self.keep_limit = min(kept_data_limit(b), dl)
  self.tail = ""
  self.tail_lost = false
  local digests = pdu_carries_digests(b.opcode) and dl > 0
  self.dd_this = digests and self.dd == "on"
  self.dd_probe = digests and self.dd == "unknown"
  if dl == 0 then
    self:end_pdu(self.pdu_abs + #self.hdr - 1, false)
  else
    self.state = "data"
  end
end

function Framer:step_data(s, i, e, abs)
  local nin = e - i + 1
  -- (min written out here and in other per-segment paths: a Lua call costs more than the test)
  local take = self.data_left + self.pad_left
  take = nin < take and nin or take
  local d = take < self.data_left and take or self.data_left
  if #self.keep < self.keep_limit then
    local k = min(d, self.keep_limit - #self.keep)
    self.keep = self.keep .. s:sub(i, i + k - 1)
  end
  if (self.dd_this or self.dd_probe) and self.crc_valid then
    self.crc = crc32c_update(self.crc, s, i, i + take - 1)
  end
  self.data_left = self.data_left - d
  self.pad_left = self.pad_left - (take - d)
  if self.data_left + self.pad_left == 0 then
    if self.dd_this or self.dd_probe then
      self.state = self.dd_this and "data_digest" or "probe"
      self.tail = ""
      self.tail_abs = abs + take
    else
      self:end_pdu(abs + take - 1, false)
    end
  end
  return take
end

function Framer:step_data_digest(s, i, e, abs)
  local take = min(e - i + 1, 4 - #self.tail)
  self.tail = self.tail .. s:sub(i, i + take - 1)
  if #self.tail < 4 then return take end
  if self.crc_valid and not self.tail_lost and digest_from_wire(self.tail, 1) ~= crc32c_final(self.crc) then
    self.digest_bad = true
  end
  self:end_pdu(abs + take - 1, false)
  return take
end

function Framer:plausible_at(t, at)
  if #t < at + 48 then return false end
  return plausible_bhs(parse_bhs(t, at + 1), self.from_initiator, self.max_dl)
end

function Framer:step_probe(s, i, e, abs, force)
  local take = 0
  if s then
    take = min(e - i + 1, PROBE - #self.tail)
    self.tail = self.tail .. s:sub(i, i + take - 1)
  end
  local t = self.tail
  local crc_match = self.crc_valid and #t >= 4 and digest_from_wire(t, 1) == crc32c_final(self.crc)
  -- A CRC that was computable and did not match: 4 bytes that can start a BHS already say "no
  -- digest" (waiting for 48 would delay this PDU's end until the peer's next PDU).
  local at0 = not crc_match and (self:plausible_at(t, 0) or
    (self.crc_valid and #t >= 4 and #t < 48 and self:could_start_bhs(t)))
  if not crc_match and not at0 and #t < PROBE and not force then return take end
  local on, commit = crc_match, true
  if not on then
    local at4 = self:plausible_at(t, 4)
    on = at4 and not at0
    commit = at0 ~= at4
  end
  if commit then self.dd = on and "on" or "off" end
  local probe, probe_abs = t, self.tail_abs
  if on and #probe >= 4 then
    if not crc_match and self.crc_valid then self.digest_bad = true end
    self:end_pdu(probe_abs + 3, false)
    if #probe > 4 then self:push_back(probe:sub(5), probe_abs + 4) end
  else
    self:end_pdu(probe_abs - 1, false)
    if #probe > 0 then self:push_back(probe, probe_abs) end
  end
  return take
end

function Framer:could_start_bhs(t)
  local b0 = t:byte(1)
  if b0 >= 0x80 then return false end
  local op = b0 % 64
  if not OPNAMES[op] or is_initiator_opcode(op) ~= self.from_initiator then return false end
  if not self.from_initiator and b0 >= 0x40 then return false end
  return true
end

function Framer:end_pdu(last_abs, truncated)
  local b = self.bhs
  local first, keep, inc = self.pdu_abs, self.keep, self.data_incomplete
  local kept_truncated = #keep < b.data_length
  self.pdus = self.pdus + 1
  self:reset_pdu()
  if not self.unconfirmed then
    self.sink:on_pdu_end(b, first, last_abs, keep, kept_truncated, inc, truncated, self.digest_bad)
    return
  end
  local h = self.held
  h[#h + 1] = { b, first, last_abs, keep, kept_truncated, inc, truncated, self.digest_bad, n = 8 }
  -- Ended at a chunk's end: where senders end PDUs, not chance.
  if not truncated and (last_abs + 1 == self.chunk_end or last_abs + 1 == self.chunk_base) then
    self:confirm()
  end
end

function Framer:confirm()
  local held = self.held
  self.unconfirmed, self.held = false, {}
  for _, h in ipairs(held) do
    if h.n then
      self.sink:on_pdu_end(h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8])
    else
      self.sink:on_pdu_start(h[1], h[2])
    end
  end
end

function Framer:drop_held()
  self.unconfirmed, self.strict_next = false, false
  if #self.held > 0 then self.held = {} end
end

function Framer:lose_sync(at)
  self:drop_held()  -- it did not chain
  self:reset_pdu()
  self.state = "scan"
  self.candidate = false
  self.carry = ""
  self.sink:on_sync_lost(at)
end

function Framer:gap(lost, sink)
  if lost == 0 then return end
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs
  local at = self.next_abs
  self.next_abs = self.next_abs + lost
  local left = lost
  while true do
    local h = self.held
    if self.unconfirmed and #h > 0 and h[#h].n then self:confirm() end  -- its chain is lost
    local st = self.state
    if st == "scan" then
      self.carry = ""
      return
    elseif st == "probe" then
      self:step_probe(nil, 1, 0, at, true)
      self:run("", 1, 0, at)
    elseif st == "header" then
      if self.candidate then
        self:reset_pdu()
        self.candidate = false
        self.state = "scan"
      else
        self:lose_sync(at)
      end
    elseif st == "data" then
      local inn = min(left, self.data_left + self.pad_left)
      local d = min(inn, self.data_left)
      if d > 0 then
        self.data_incomplete = true
        self.keep_limit = #self.keep
      end
      self.crc_valid = false
      self.data_left = self.data_left - d
      self.pad_left = self.pad_left - (inn - d)
      left = left - inn
      at = at + inn
      if self.data_left + self.pad_left > 0 then return end
      if self.dd_this then
        self.state = "data_digest"
        self.tail = ""
        self.tail_abs = at
      elseif self.dd_probe then
        if left == 0 then
          self.state = "probe"
          self.tail = ""
          self.tail_abs = at
          return
        end
        self:end_pdu(at - 1, false)
        self:lose_sync(at)
      else
        self:end_pdu(at - 1, false)
        if left == 0 then return end
        self:lose_sync(at)
      end
    else -- data_digest
      local inn = min(left, 4 - #self.tail)
      self.tail = self.tail .. string.rep("\0", inn)
      self.tail_lost = true
      left = left - inn
      at = at + inn
      if #self.tail < 4 then return end
      self:end_pdu(at - 1, false)
      if left == 0 then return end
      self:lose_sync(at)
    end
  end
end

function Framer:finish(sink)
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs
  if self.state == "probe" then
    self:step_probe(nil, 1, 0, self.next_abs, true)
    self:run("", 1, 0, self.next_abs)
  end
  if self.started then
    self:end_pdu(self.next_abs == 0 and 0 or self.next_abs - 1, true)
  end
  if self.state == "scan" then self.carry = "" else self:reset_pdu() end
  self:drop_held()  -- never chained
end
