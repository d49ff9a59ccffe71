---------------------------------------------------------------------------------------------
-- PduStream (engine/src/session/pdu_stream.cpp): framer events per segment, each PDU's first
-- byte mapped back to the segment (frame, time) that carried it.

local PduStream = {}
PduStream.__index = PduStream

-- The last RECENT segment starts (stream offset, frame, time), in a ring: no table per segment.
local RECENT = 64

function PduStream.new(from_initiator)
  return setmetatable({ framer = Framer.new(from_initiator), events = {}, starts = {}, ends = {}, n_start = 0,
                        n_end = 0, open = false,
                        r_abs = {}, r_frame = {}, r_t = {}, r_count = 0, abs = 0, cur_frame = 0, cur_t = 0 },
                      PduStream)
end

function PduStream:start_unsynced() self.framer:start_unsynced() end
-- max_data_segment: a longer DataSegmentLength is taken as lost framing (then resync).
function PduStream:set_digests(header, data, max_data_segment)
  self.framer:set_digests(header, data, max_data_segment)
end
function PduStream:seed_digests(header, data) self.framer:seed_digests(header, data) end
function PduStream:mid_pdu() return self.open end  -- inside a PDU whose header has been seen
-- What the framing found: true, false, or nil while undetected (the engine's std::optional).
local function detected(v) if v == "on" then return true elseif v == "off" then return false end return nil end
function PduStream:header_digest() return detected(self.framer.hd) end
function PduStream:data_digest() return detected(self.framer.dd) end
function PduStream:header_digest_on() return self.framer.hd == "on" end
function PduStream:data_digest_on() return self.framer.dd == "on" end
function PduStream:pdus() return self.framer.pdus end
function PduStream:resyncs() return self.framer.resyncs end

function PduStream:remember(abs, frame, t)
  local k = self.r_count % RECENT + 1
  self.r_count = self.r_count + 1
  self.r_abs[k], self.r_frame[k], self.r_t[k] = abs, frame, t
end

-- The frame and time of the segment that carried byte `off` (0, 0: no longer known).
function PduStream:locate(off)
  local fr = self.framer
  if off >= fr.chunk_base and off < fr.chunk_end then return self.cur_frame, self.cur_t end
  -- newest first
  local n, ra = self.r_count, self.r_abs
  for i = n, max(n - RECENT + 1, 1), -1 do
    local k = (i - 1) % RECENT + 1
    if ra[k] <= off then return self.r_frame[k], self.r_t[k] end
  end
  return 0, 0
end

-- s's n bytes from position i
-- The events of one feed, lose or finish: one list and its records, refilled by the next (the
-- receiver reads them before; what it keeps, it copies). The headers of the PDUs that ended go
-- back to the framer, to be refilled.
local function clear_events(self)
  local ev = self.events
  for k = #ev, 1, -1 do ev[k] = nil end
  local ends, free = self.ends, self.framer.bhs_free
  for k = 1, self.n_end do
    local e = ends[k]
    free[#free + 1] = e.bhs
    e.bhs = nil
  end
  self.n_start, self.n_end = 0, 0
end

do
local framer_feed = Framer.feed
function PduStream:feed(s, i, n, frame, t)
  clear_events(self)
  self.cur_frame, self.cur_t = frame, t
  local c = self.r_count  -- (remember, written out: per segment)
  local k = c % RECENT + 1
  self.r_count = c + 1
  self.r_abs[k], self.r_frame[k], self.r_t[k] = self.abs, frame, t
  framer_feed(self.framer, s, i, n, self)
  self.abs = self.abs + n
  return self.events
end
end

function PduStream:gap(lost)
  self.framer:gap(lost, self)
  self.abs = self.abs + lost
  self:remember(self.abs, 0, 0)
end

-- Bytes lost between segments: the events this gap ends (a PDU whose last bytes were lost).
function PduStream:lose(lost)
  clear_events(self)
  self:gap(lost)
  return self.events
end

function PduStream:finish()
  clear_events(self)
  self.framer:finish(self)
  return self.events
end

function PduStream:on_pdu_start(b, first_abs)
  local ff, ft = self:locate(first_abs)
  local k = self.n_start + 1
  self.n_start = k
  local e = self.starts[k]
  if not e then
    e = { type = "start", bhs = b, first_frame = ff, first_t = ft }
    self.starts[k] = e
  else
    e.bhs, e.first_frame, e.first_t = b, ff, ft
  end
  local ev = self.events
  ev[#ev + 1] = e
  self.open = true
end

function PduStream:on_pdu_end(b, first_abs, last_abs, kept, kept_truncated, data_incomplete, truncated,
                               digest_bad)
  local ff, ft = self:locate(first_abs)
  -- The segment with the PDU's last byte: the status frame of a SCSI Response.
  local lf, lt = self:locate(last_abs)
  local k = self.n_end + 1
  self.n_end = k
  local e = self.ends[k]
  if not e then
    e = { type = "end", bhs = b, data = kept, kept_truncated = kept_truncated,
      data_incomplete = data_incomplete, truncated = truncated, digest_bad = digest_bad,
      first_frame = ff, first_t = ft, last_frame = lf, last_t = lt }
    self.ends[k] = e
  else
    e.bhs, e.data, e.kept_truncated, e.data_incomplete, e.truncated, e.digest_bad = b, kept, kept_truncated,
      data_incomplete, truncated, digest_bad
    e.first_frame, e.first_t, e.last_frame, e.last_t = ff, ft, lf, lt
  end
  local ev = self.events
  ev[#ev + 1] = e
  self.open = false
end

function PduStream:on_sync_lost() self.open = false end
