---------------------------------------------------------------------------------------------
-- TCP tracking and reassembly (engine/src/tcp/tracker.cpp): handshake, ACKs and windows, round
-- trips, the byte streams put back in order. Methods of Connection: the port keeps one object per
-- connection where the engine has a tcp::Tracker and its receiver.

local REORDER_WAIT_NS = RULES.reorder_wait_ms * 1e6

function Connection:on_segment(seg, dir)
  self.frames = self.frames + 1
  if #self.pending_resends > 0 then self:settle_resends(seg, dir) end
  for d = 0, 1 do
    local f = self.flow[d]
    if f.unseen_upto > f.next and seg.t - f.unseen_t > REORDER_WAIT_NS then self:declare_unseen(d) end
  end
  local fl = seg.flags  -- FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10 (tested inline: once per segment)
  local syn, rst = fl % 4 >= 2, fl % 8 >= 4
  local una_before = self.flow[1 - dir].una
  if syn then self:handle_handshake(seg, dir) end
  -- a release's sample is given after the segment is judged: it may not bound its own release
  local released = seg.has_ts and self:handle_echo(seg, dir) or nil
  if seg.wire_len > 0 then self.flow[dir].last_payload_t = seg.t end
  if fl % 32 >= 16 then self:handle_ack(seg, dir) end
  if seg.wire_len > 0 and not syn then self:handle_payload(seg, dir) end
  if released then rtt_released(self.rtt[dir], released) end
  local f = self.flow[dir]
  if fl % 2 == 1 or rst then
    f.fin_seen = true
    if rst or self.flow[1 - dir].fin_seen then self.closed = true end
  end
  self.last_t = seg.t
  -- The window this side advertises: its scale known from both SYNs, else the least the data in
  -- flight proves (engine/src/tcp/tracker.cpp).
  local other = self.flow[1 - dir]
  local raw = seg.window
  local win = raw
  local scale_known = f.syn_seen and other.syn_seen
  if not syn then
    if scale_known and f.wscale_offered >= 0 and other.wscale_offered >= 0 then
      win = raw * 2 ^ (f.wscale_offered < 14 and f.wscale_offered or 14)
    elseif not scale_known then
      win = raw * 2 ^ other.peer_wscale_min
    end
  end
  local window_changed
  if scale_known then
    window_changed = other.peer_window_known and other.peer_window ~= win
  else
    window_changed = other.peer_window_known and other.peer_window_raw ~= raw
  end
  other.peer_window = win
  other.peer_window_raw = raw
  other.peer_wscale_known = scale_known
  other.peer_window_known = true
  if other.una_known and (other.una ~= una_before or window_changed or other.ak_tail < other.ak_head) then
    -- (what classify_hold may need)
    other:record_ack({ ack = other.una, t = seg.t, frame = seg.frame, window = win, h = other.acked_h,
                       cmd = other.acked_cmd, data_t = other.acked_data_t,
                       data_frame = other.acked_data_frame, raw = raw, tsval = seg.tsval or 0,
                       has_ts = seg.has_ts or false }, seg.t - RULES.ack_record_keep_rtts * self:full_rtt_ns() - RULES.ack_record_keep_ms * 1e6)
  end
  if self.settling.head <= self.settling.tail then self:settle(seg.t) end
end

function Connection:handle_handshake(seg, dir)
  local f = self.flow[dir]
  if f.syn_seen and f.started and f:unwrap(seg.seq) == f.next - 1 then return end
  f:anchor((seg.seq + 1) % TWO32)
  f.syn_seen = true
  self.pdus[dir].framer:set_digests(false, false)
  f.wscale_offered = seg.wscale or -1
  if seg.mss and seg.mss ~= 0 then
    self.flow[1 - dir].mss = seg.mss
    self.flow[1 - dir].mss_from_syn = true
  end
  if not hasbit(seg.flags, 0x10) then
    self.saw_syn = true
    self.syn_t = seg.t
  elseif self.saw_syn and not self.saw_synack then
    self.saw_synack = true
    self.synack_t = seg.t
    rtt_sample(self.rtt[T2I], seg.t - self.syn_t, true)
  end
end

-- Timestamps (engine: Tracker::echo): a data segment echoing a newer TSval than the side's data
-- before it left after that TSval's first segment arrived; with that segment a pure ACK, a release.
local ECHO_KEEP_NS = RULES.echo_keep_ms * 1e6
function Connection:handle_echo(seg, dir)
  local f = self.flow[dir]
  if f.tsf_tail < f.tsf_head or f.tsf[f.tsf_tail].val ~= seg.tsval then
    while f.tsf_head <= f.tsf_tail and (f.tsf_tail - f.tsf_head + 1 >= RULES.echo_records_max or
          f.tsf[f.tsf_head].t < seg.t - ECHO_KEEP_NS) do
      f.tsf[f.tsf_head] = nil
      f.tsf_head = f.tsf_head + 1
    end
    f.tsf_tail = f.tsf_tail + 1
    f.tsf[f.tsf_tail] = { val = seg.tsval, t = seg.t, pure = seg.wire_len == 0 }
  end
  if seg.wire_len == 0 or not hasbit(seg.flags, 0x10) then return nil end
  if f.data_echo_seen then
    local d = (seg.tsecr - f.data_echo) % TWO32
    if d == 0 or d >= 2147483648 then return nil end
    f.echo_moved_frame = seg.frame
  end
  f.data_echo_seen, f.data_echo = true, seg.tsecr
  local peer = self.flow[1 - dir]
  for i = peer.tsf_tail, peer.tsf_head, -1 do
    local e = peer.tsf[i]
    if e.val == seg.tsecr then
      -- not when the peer sent data since: this may answer that data after a think time
      if e.pure and peer.last_payload_t < e.t then return seg.t - e.t end
      return nil
    end
  end
  return nil
end

function Connection:handle_ack(seg, dir)
  local peer = self.flow[1 - dir]
  if not peer.started then return end
  if self.saw_synack and dir == I2T and not self.rtt[I2T].hs and not hasbit(seg.flags, 0x02) then
    rtt_sample(self.rtt[I2T], seg.t - self.synack_t, true)
  end
  local ack = peer:unwrap(seg.ack)
  if ack > peer.max_end + 1073741824 then return end
  if peer.fin_seen and ack == peer.next + 1 then ack = peer.next end  -- the FIN's sequence number
  if peer.ua_head <= peer.ua_tail and (not peer.una_known or ack > peer.una) then
    -- Records end in increasing order (each carries new data): a binary search, not a scan.
    local k = peer:first_unacked_ending_after(ack - 1)
    local s = k and peer.unacked[k]
    if s and s.e == ack then rtt_sample(self.rtt[dir], seg.t - s.t, false, seg.wire_len > 0) end
  end
  if ack > peer.next and peer.started then
    -- Missing at the capture point, unless they come soon after: a capture can show a segment
    -- just after the ACK that covers it (not when later data is already held).
    local upto = min(ack, peer.max_end > peer.next and peer.max_end or ack)
    if peer.ooo_count > 0 then
      self:declare_gap(1 - dir, upto, seg.frame)
    else
      if peer.unseen_upto <= peer.next then peer.unseen_t, peer.unseen_frame = seg.t, seg.frame end
      peer.unseen_upto = max(peer.unseen_upto, upto)
    end
  end
  local before = peer.una_known and peer.una or ack
  if peer:acked(ack, seg.t, seg.frame) then
    link_advanced(peer.link, ack - before, seg.t, self:full_rtt_ns())
    if peer.path then link_advanced(peer.path, ack - before, seg.t, self:full_rtt_ns()) end
  end
end

function Connection:declare_unseen(dir)
  local f = self.flow[dir]
  self:declare_gap(dir, f.unseen_upto, f.unseen_frame)  -- then next >= unseen_upto: none pending
end

function Connection:handle_payload(seg, dir)
  local f = self.flow[dir]
  local len = seg.wire_len
  if not f.started then
    -- No SYN: a stream that starts with a Login PDU is framed from here (no digests until
    -- negotiated); otherwise the capture began mid-stream and framing resumes at a BHS.
    f:anchor(seg.seq)
    if starts_with_login(seg.payload, dir) then
      self.pdus[dir].framer:set_digests(false, false)
    else
      self.mid_session = true
      self.pdus[dir].framer:start_unsynced()
      local sd = self.digest_seed and self.digest_seed[dir]
      if sd then self.pdus[dir].framer:seed_digests(sd.h, sd.d) end
    end
  end
  f.largest_payload = f.largest_payload > len and f.largest_payload or len
  if seg.options_len and seg.options_len ~= 0 then f.data_options_len = seg.options_len end
  local start = f:unwrap(seg.seq)
  local e = start + len
  -- Acknowledged bytes still unseen when the sender's next data comes past them: missing.
  if start > f.next and f.unseen_upto > f.next then self:declare_unseen(dir) end
  if e <= f.next then
    local keepalive = len <= 1 and start + 1 >= f.next
    if not keepalive then self:note_retransmission(dir, seg, start, e) end
    return
  end
  if start > f.next then
    if f.ooo_count == 0 then f.hole_since = seg.t end
    local held = f.ooo[start]
    if not held then
      held = { bytes = "", t = 0, frame = 0 }
      f.ooo[start] = held
      f.ooo_count = f.ooo_count + 1
    end
    if #held.bytes < #seg.payload then
      f.ooo_bytes = f.ooo_bytes + #seg.payload - #held.bytes
      held.bytes, held.t, held.frame = seg.payload, seg.t, seg.frame
    end
    f.max_end = max(f.max_end, e)
    f:move_ref(e)
    if f.ooo_bytes > self.opt.max_out_of_order_bytes then
      self:declare_gap(dir, f:ooo_first(), seg.frame)
    end
    return
  end
  if seg.flags % 16 < 8 then f:saw_full(len) end  -- no PSH: more data was queued
  local m = f:effective_mss()
  if len > m then  -- TSO/GRO at the capture point; a whole multiple of the MSS proves it
    f.aggregates = f.aggregates + 1
    if len % m == 0 then f.aggregates_whole = f.aggregates_whole + 1 end
  end
  if f.ooo_count > 0 then
    self.retransmissions = self.retransmissions + 1
    local fd = { kind = "retransmission", side = side_of(dir), frame = seg.frame,
                 lost_ms = ms(seg.t - f.hole_since),
                 detail = "retransmission fills a hole: the original was lost before the capture point" }
    local c = self.current_slot[dir]
    if c and c.used then
      fd.itt, fd.command_first_frame = c.itt, c.first_frame
      c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms
      if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
      self:add_kind(c, "retransmission")
    end
    self:emit_finding(fd)
  end
  local skip = f.next - start
  local bytes = seg.payload
  local wire_rest = len - skip
  if skip >= #bytes then bytes = "" elseif skip > 0 then bytes = bytes:sub(skip + 1) end
  local small = f:is_small(len)
  self.seg_h, self.seg_cmd, self.seg_itt = -1, 0, 0
  self:deliver(dir, bytes, wire_rest, seg)
  local cur = self.current_slot[dir]
  -- owner_cmd: which command held the slot then (a slot is reused once its command is released).
  -- (One constructor: the record's table is sized once.)
  local rec = { s = start, e = e, t = seg.t, frame = seg.frame, owner = cur and cur.slot or 0, small = small,
                owner_cmd = cur and cur.first_frame or 0, h = self.seg_h, cmd = self.seg_cmd, itt = self.seg_itt }
  f:push_unacked(rec)
  if f.una_known and f.una >= e then f:trim_acked(f.unseen_t, f.unseen_frame) end  -- its ACK came first
  if rec.small then
    f.has_small = true
    f.last_small = { e = e, t = seg.t, frame = seg.frame, h = rec.h, cmd = rec.cmd, acked = false,
                     ack_t = 0, ack_frame = 0 }
  end
  f.max_end = f.max_end > e and f.max_end or e
  f:infer_window_scale()
  f.has_last_data = true
  f.last_data_t = seg.t
  f.last_data_frame = seg.frame
  self:drain_out_of_order(dir, seg)
end

function Connection:drain_out_of_order(dir, seg)
  local f = self.flow[dir]
  -- Held bytes reach the receiver only now, when seg fills the hole before them.
  local outer = self.filling
  self.filling = seg
  while f.ooo_count > 0 do
    local start = f:ooo_first()
    if start > f.next then break end
    local held = f.ooo[start]
    f.ooo[start] = nil
    f.ooo_count = f.ooo_count - 1
    f.ooo_bytes = f.ooo_bytes - #held.bytes
    local e = start + #held.bytes
    if e > f.next then
      local skip = f.next - start
      local bytes = held.bytes:sub(skip + 1)
      local s = { frame = held.frame, t = held.t, wire_len = #bytes, flags = seg.flags, seq = f.next % TWO32 }
      self:deliver(dir, bytes, #bytes, s)
    end
  end
  self.filling = outer
end

function Connection:declare_gap(dir, upto, frame)
  local f = self.flow[dir]
  while f.next < upto or (f.ooo_count > 0 and f:ooo_first() <= upto) do
    local hole_end = upto
    if f.ooo_count > 0 then hole_end = min(hole_end, f:ooo_first()) end
    if hole_end > f.next then
      local lost = hole_end - f.next
      f.bytes_missing = f.bytes_missing + lost
      f.next = hole_end
      f:move_ref(f.next)
      local events = self.pdus[dir]:lose(lost)
      local c = self.current_slot[dir]
      if c and c.used then c.data_incomplete = true end
      -- A PDU whose last bytes were lost ends here: a status header in the capture completes its
      -- command, timed at the header's segment (the engine's Connection::lost).
      if #events > 0 then
        self:on_pdus(dir, { frame = f.last_data_frame, t = f.last_data_t, wire_len = 0 }, events, false, nil)
      end
    end
    if f.ooo_count == 0 then break end
    local first = f.ooo[f:ooo_first()]
    self:drain_out_of_order(dir, { frame = first.frame, t = first.t, flags = 0 })
    if f.ooo_count == 0 or f.next >= upto then break end
  end
end
