---------------------------------------------------------------------------------------------
-- Connection (engine/src/session/connection.cpp)

local Connection = {}
Connection.__index = Connection

-- The first bytes of dir's stream are a Login PDU (engine: Connection::starts_with_login).
local function starts_with_login(seg, dir)
  if seg.pay_len < 48 then return false end
  local want = dir == I2T and OP.LoginRequest or OP.LoginResponse
  if seg.pkt:byte(seg.pay) % 64 ~= want then return false end
  return plausible_bhs(parse_bhs(seg.pkt, seg.pay), dir == I2T)
end

-- sink: on_command(c), on_finding(f) (the Analyzer, or a scout's that discards them); sessions:
-- a SessionRegistry.
function Connection.new(id, initiator, target, options, sink, sessions)
  local c = setmetatable({ id = id, initiator = initiator, target = target, opt = options, sink = sink,
    sessions = sessions, tcp = Tracker.new(options.max_out_of_order_bytes),
    pdus = { [0] = PduStream.new(true), [1] = PduStream.new(false) },
    last_t = 0, mid_session = false, keys = default_keys(), login = Negotiation.new(), login_done = false,
    saw_login = false, initiator_name = "", target_name = "", isid = "", tsih = 0,
    header_digest = false, data_digest = false, by_itt = {}, open_count = 0, current_slot = { [0] = nil, [1] = nil },
    slots = {}, slot_count = 0, free_slots = {},
    frames = 0, commands = 0, completed = 0, outstanding = 0, max_outstanding = 0,
    first_command_frame = 0, digest_errors = 0, session = nil, orphans = {}, settling = { head = 1, tail = 0 },
    seg_h = -1, seg_cmd = 0, seg_itt = 0, rules = Rules.new() }, Connection)
  c.view = ConnectionView.new(id, c.tcp, options)  -- what the rules see of it
  -- the link each way, shared by the connections between the same two hosts
  c.tcp:share_link(I2T, sessions:path(initiator, target))
  c.tcp:share_link(T2I, sessions:path(target, initiator))
  return c
end

-- Resolved on first use: after login when there is one.
function Connection:session_id()
  if self.session then return self.session end
  local key
  if self.login_done then
    key = "login:" .. self.initiator_name .. "|" .. self.isid .. "|" .. self.target_name .. "|" .. self.tsih
  else
    key = "connection:" .. self.id
  end
  self.session = self.sessions:resolve(key)
  local s = self.sessions:info(self.session)
  s.connections[#s.connections + 1] = self.id
  -- (the first connection's endpoints name a session without a login in the plugin's report)
  if not s.initiator then s.initiator, s.target = self.initiator, self.target end
  if self.login_done then
    s.initiator_name, s.target_name = self.initiator_name, self.target_name
    s.session_type, s.isid, s.tsih = self.session_type, self.isid, self.tsih
  end
  return self.session
end

function Connection:closed() return self.tcp:closed() end
-- How long after closing its last segments may still pass (final ACK, resent FIN).
function Connection:linger_ns()
  return max(RULES.closed_linger_ms * 1e6, RULES.closed_linger_rtts * self:full_rtt_ns())
end
-- What a first look at a joined connection found (Analyzer), given before its first segment:
-- the round trips a scout measured on the same segments, with their spread, and the digests the
-- framing of a stream joined mid-way would probe for.
function Connection:seed_rtt(side_dir, scout) self.tcp:seed_rtt(side_dir, scout) end
function Connection:seed_digests(dir, h, d)
  self.digest_seed = self.digest_seed or {}
  self.digest_seed[dir] = { h = h, d = d }
end
function Connection:rtt(side_dir) return self.tcp:rtt(side_dir) end
function Connection:header_digest_seen(dir) return self.pdus[dir]:header_digest() end
function Connection:data_digest_seen(dir) return self.pdus[dir]:data_digest() end

function Connection:rtt_ns(side_dir) return self.tcp:rtt_ns(side_dir) end  -- capture point <-> that side
function Connection:full_rtt_ns() return self.tcp:full_rtt_ns() end

-- TCP: the tracker (tcp/tracker.lua) tells what the streams carry; this is its receiver. -------

-- (on_segment and deliver run per segment: the tracker's and the stream's functions called as
-- upvalues, not looked up as methods)
do
local tracker_on_segment, pdu_feed = Tracker.on_segment, PduStream.feed
function Connection:on_segment(seg, dir)
  self.frames = self.frames + 1
  local t = seg.t
  self.last_t = t
  local resends = self.rules.retransmission
  if #resends.pending_ > 0 then resends:settle(self.view, self, self.slots, seg, dir) end  -- (pending(), per segment)
  tracker_on_segment(self.tcp, seg, dir, self)
  local q = self.settling
  if q.head <= q.tail then self:settle(t) end
end

function Connection:stream_from_syn(dir)
  -- From the first byte on, a stream starts with Login PDUs, which never carry digests; the
  -- login's keys say what comes after (RFC 7143 13.1), so no detection is needed.
  self.pdus[dir]:set_digests(false, false)
end

function Connection:stream_without_syn(dir, seg)
  -- If the first bytes are a Login PDU, the capture began at the login (framed from here, no
  -- digests until negotiated); otherwise it began mid-stream and framing resumes at a plausible BHS.
  if starts_with_login(seg, dir) then
    self.pdus[dir]:set_digests(false, false)
  else
    self.mid_session = true
    self.pdus[dir]:start_unsynced()
    local sd = self.digest_seed and self.digest_seed[dir]
    if sd then self.pdus[dir]:seed_digests(sd.h, sd.d) end
  end
end

-- Returns the tcp::DeliveryTag as five values (tcp/tracker.lua).
-- The new bytes are s's n bytes from position i (the frame's string: no copy per segment).
function Connection:deliver(dir, s, i, n, wire_len, seg, filled_by)
  local outer = self.filling
  self.filling = filled_by
  self.seg_h, self.seg_cmd, self.seg_itt = -1, 0, 0
  local ps = self.pdus[dir]
  local began_mid = ps.open  -- (mid_pdu)
  local cur = self.current_slot
  local mid = began_mid and cur[dir]
  local mid_slot = mid and mid.slot or 0
  local events = pdu_feed(ps, s, i, n, seg.frame, seg.t)
  -- the capture's snaplen cut this packet: the bytes exist, we just cannot see them
  if n < wire_len then ps:gap(wire_len - n) end
  Connection.on_pdus(self, dir, seg, events, began_mid, mid_slot)
  self.filling = outer
  local owner = cur[dir]
  if owner then return owner.slot, owner.first_frame, self.seg_h, self.seg_cmd, self.seg_itt end
  return 0, 0, self.seg_h, self.seg_cmd, self.seg_itt
end
end

function Connection:lost(dir, bytes, frame, why)
  local events = self.pdus[dir]:lose(bytes)
  local c = self.current_slot[dir]
  if c and c.used then c.data_incomplete = true end
  -- A PDU whose last bytes were lost ends here: a status header in the capture completes its
  -- command, timed at the header's segment (docs/rules.md "Commands").
  if #events > 0 then
    local f = self.tcp:flow(dir)
    self:on_pdus(dir, blank_segment(f.last_data_frame, f.last_data_t), events, false, nil)
  end
end

-- The engine's notice of the cap; this port gives no notices (lua/README.md).
function Connection:unacked_cap_hit(dir, frame, cap) end

-- rules/retransmission.lua
function Connection:hole_filled(dir, seg, since)
  local c = self.current_slot[dir]
  self.rules.retransmission:hole_filled(self.view, self, dir, seg, since, c and c.used and c or nil)
end
function Connection:resent(dir, seg, original)
  self.rules.retransmission:resent(self.view, self, self.slots, dir, seg, original)
end

-- iSCSI PDUs and commands -------------------------------------------------------------------

-- Above this many open commands the open count is taken as is, without a scan.
local COUNTED_IN_FLIGHT = 64

function Connection:on_pdu_end(dir, seg, ev)
  local b = ev.bhs
  local op = b.opcode
  if ev.digest_bad then self.digest_errors = self.digest_errors + 1 end
  if op == OP.LoginRequest or op == OP.LoginResponse or op == OP.TextRequest or op == OP.TextResponse then
    self:on_login(dir, ev, seg)
    return
  end
  if op == OP.Reject or op == OP.TaskMgmtResponse or op == OP.LogoutResponse then return end
  if b.itt == RESERVED_TAG then return end
  local c = self.by_itt[b.itt]
  if not c then
    -- A reply framed before its command (the initiator's stream still waiting on a digest
    -- probe after a mid-stream start): kept until the command shows up.
    if dir == T2I and not self.replaying and (op == OP.DataIn or op == OP.ScsiResponse or op == OP.R2T) then
      local o = self.orphans
      if #o >= 32 then table.remove(o, 1) end
      local fr, t = seg.frame, seg.t
      if ev.last_frame and ev.last_frame ~= 0 then fr, t = ev.last_frame, ev.last_t end
      local copy, bhs = {}, {}  -- (the stream refills its event records and headers)
      for k, v in pairs(ev) do copy[k] = v end
      for k, v in pairs(ev.bhs) do bhs[k] = v end
      copy.bhs = bhs
      o[#o + 1] = { ev = copy, frame = fr, t = t }
    end
    return
  end
  if ev.data_incomplete then c.data_incomplete = true end
  -- A reply framed before its command (replayed), or before any segment of the answer counted.
  if dir == T2I and (not c.has_seg[T2I] or self.replaying) and (op == OP.DataIn or op == OP.ScsiResponse or op == OP.R2T) then
    self:late_reply_events(c, seg, ev)
  end
  local last_t = (ev.last_frame and ev.last_frame ~= 0) and ev.last_t or seg.t
  if op == OP.ScsiCommand then
    c.needed_t = last_t  -- framing may complete later
    if b.data_length > 0 then c.data_out_bytes = c.data_out_bytes + b.data_length end
    if c.unsolicited_expected <= c.data_out_bytes then c.request_done = true end
    self:replay_orphans(b.itt)
  elseif op == OP.DataOut then
    c.data_out_bytes = c.data_out_bytes + b.data_length
    if hasbit(b.flags, 0x80) then
      c.needed_t = last_t
      c.request_done = true
    end
  elseif op == OP.R2T then
    c.r2ts = c.r2ts + 1
    if c.first_r2t_frame == 0 then c.first_r2t_frame = seg.frame end
    c.last_r2t_t = seg.t
    c.h_at_r2t = c.h_target
  elseif op == OP.DataIn then
    c.data_in_bytes = c.data_in_bytes + b.data_length
    if hasbit(b.flags, 0x01) then
      c.scsi_status = b.byte3
      self:complete(c, seg, ev)
    end
  elseif op == OP.ScsiResponse then
    c.iscsi_response = b.byte2
    c.scsi_status = b.byte3
    c.sense_key, c.asc, c.ascq = iscsi_sense(ev.data)
    self:complete(c, seg, ev)
  end
end

-- The command's orphans are taken out first and each is replayed once: one that still finds no
-- open command (a duplicate reply after the status) is dropped, never queued again.
function Connection:replay_orphans(itt)
  local o = self.orphans
  if #o == 0 then return end
  local mine, rest = {}, {}
  for i = 1, #o do
    if o[i].ev.bhs.itt == itt then mine[#mine + 1] = o[i] else rest[#rest + 1] = o[i] end
  end
  if #mine == 0 then return end
  self.orphans = rest
  local outer = self.replaying
  self.replaying = true
  for i = 1, #mine do
    local x = mine[i]
    self:on_pdu_end(T2I, blank_segment(x.frame, x.t), x.ev)
  end
  self.replaying = outer
end

function Connection:complete(c, seg, ev)
  c.completed = true
  -- The segment with the PDU's last byte (earlier than this one while a digest probe waited).
  if ev.last_frame and ev.last_frame ~= 0 then
    c.status_frame, c.status_t = ev.last_frame, ev.last_t
  else
    c.status_frame, c.status_t = seg.frame, seg.t
  end
  if self.filling and self.filling.t > c.status_t then  -- the status waited for a hole to fill
    c.status_frame, c.status_t = self.filling.frame, self.filling.t
  end
  -- A status captured before its command cannot be timed: it counts as seen with the command.
  c.status_frame = max(c.status_frame, c.first_frame)
  c.status_t = max(c.status_t, c.first_t)
  -- Its PDU in progress in a stream whose acknowledged bytes the capture has not shown (their gap
  -- is declared later: tcp/tracker.lua): that data is missing.
  for d = 0, 1 do
    local f = self.tcp:flow(d)
    if self.current_slot[d] == c and f.unseen_upto > f.next then c.data_incomplete = true end
  end
  -- Answered; reported once the initiator acknowledges the status (settle), in status order.
  self:retire(c)
  c.settling = true
  -- Near the initiator a segment lost after the capture point cannot precede the status (the
  -- initiator's stream would have a hole): no need to wait.
  local near_initiator = self.tcp:rtt(I2T):known() and self.tcp:rtt(T2I):known() and
                         self:rtt_ns(I2T) * RULES.near_initiator_rtt_factor < self:full_rtt_ns()
  c.settle_seq = near_initiator and 0 or self.tcp:flow(T2I).next
  local q = self.settling
  q.tail = q.tail + 1
  q[q.tail] = c
  self:settle(seg.t)
end

local SETTLE_MAX_NS = RULES.settle_max_ms * 1e6  -- without the ACK: reported anyway
function Connection:settle(now, all)
  local q, f = self.settling, self.tcp.flow_[T2I]  -- (tcp:flow, written out: settle runs per segment)
  while q.head <= q.tail do
    local c = q[q.head]
    local acked = c.settle_seq == 0 or (f.una_known and f.una >= c.settle_seq)
    if not all and not acked and now - c.status_t < SETTLE_MAX_NS then break end
    q[q.head] = nil
    q.head = q.head + 1
    self:emit_command(c)
    self:release_slot(c)
  end
end

-- How many commands were in flight together with c, by capture time: framing may lag one
-- direction (a digest probe after a mid-session join) and see commands that followed each
-- other as overlapping.
function Connection:in_flight_with(c)
  if self.outstanding > COUNTED_IN_FLIGHT then return self.outstanding end
  local n = 1
  for _, o in pairs(self.by_itt) do
    if o ~= c and o.used and (not c.completed or o.first_t < c.status_t) then n = n + 1 end
  end
  if self.latest_status_t and self.latest_status_t > c.first_t then n = n + 1 end
  return n
end

function Connection:emit_command(c)
  self.max_outstanding = max(self.max_outstanding, self:in_flight_with(c))
  if c.completed then
    c.latency_ms = ms(c.status_t - c.first_t)
    c.round_trips = max(1, floor((c.h_target + 1) / 2))
    self.completed = self.completed + 1
    self.rules:judge_command(self.view, self, c, self.max_outstanding <= 1, self.latest_status_t)
    if not self.latest_status_t or c.status_t > self.latest_status_t then self.latest_status_t = c.status_t end
  end
  self.rules:give_held_findings(self.view, self, c)  -- an open command's (a no-op once given)
  self.sink:on_command(c)
end

function Connection:on_login(dir, ev, seg)
  local b = ev.bhs
  local login = b.opcode == OP.LoginRequest or b.opcode == OP.LoginResponse
  if login then
    self.saw_login = true
    self.isid = string.format("%08x%04x", b.lun_hi, floor(b.lun_lo / 65536))
    if b.opcode == OP.LoginResponse then self.tsih = b.lun_lo % 65536 end
  end
  if ev.data_incomplete then self.login_cut = true end
  self.login:add_pdu(b, ev.data, ev.kept_truncated)
  local k = self.login.result
  if not k.complete or self.login_done then return end
  self.login_done = true
  if self.login_cut then
    -- Keys read from a cut text are not taken: inferred as for a joined capture (the engine's).
    self.keys.login_cut = true
    self.initiator_name = k.initiator_name
    self.target_name = k.target_name
    self.session_type = k.session_type
    self:session_id()
    return
  end
  local keys = self.keys
  keys.immediate_data = k.immediate_data
  keys.initial_r2t = k.initial_r2t
  keys.first_burst = k.first_burst
  keys.max_burst = k.max_burst
  keys.target_mrdsl = k.target_mrdsl
  keys.initiator_mrdsl = k.initiator_mrdsl
  keys.max_outstanding_r2t = k.max_outstanding_r2t
  keys.from_login = true
  self.header_digest = k.header_digest == "CRC32C"
  self.data_digest = k.data_digest == "CRC32C"
  -- A corrupt DataSegmentLength (up to 16 MiB) would swallow the stream: bound it by what the
  -- receiver declared, with headroom for later Text renegotiation.
  local bound = max(max(k.max_burst, k.first_burst), 262144)
  self.pdus[I2T]:set_digests(self.header_digest, self.data_digest, max(bound, k.target_mrdsl))
  self.pdus[T2I]:set_digests(self.header_digest, self.data_digest, max(bound, k.initiator_mrdsl))
  self.initiator_name = k.initiator_name
  self.target_name = k.target_name
  self.session_type = k.session_type
  self:session_id()
end

-- FindingOut (rules/view.lua): a finding of this connection, tied to command c when there is one.
function Connection:finding(kind, side, frame, lost_ms, c)
  local f = { kind = kind, side = side, session = self:session_id(), connection = self.id, frame = frame,
              lost_ms = lost_ms }
  if c then f.itt, f.command_first_frame = c.itt, c.first_frame end
  return f
end
function Connection:notice(level, frame, message) end  -- the engine's notices: not in this port

function Connection:emit_finding(f)
  -- What the verdict rests on that the capture may not have shown (engine: emit_finding).
  local k = f.kind
  local sender
  if k == "delayed_ack" then sender = f.side == "initiator" and T2I or I2T
  else sender = f.side == "initiator" and I2T or T2I end
  f.inferred = {}
  if k == "nagle_hold" or k == "delayed_ack" or k == "cwnd_limited" or k == "rwnd_limited" then
    if not self.tcp:flow(sender).mss_from_syn then f.inferred[#f.inferred + 1] = "mss" end
    if k == "rwnd_limited" and not self.tcp:flow(sender).peer_wscale_known then
      f.inferred[#f.inferred + 1] = "window_scale"
    end
  elseif k == "r2t_round_trip" and not self.keys.from_login then
    f.inferred[#f.inferred + 1] = "keys"
  end
  self.sink:on_finding(f)
end

function Connection:finish()
  local resends = self.rules.retransmission
  if resends:pending() then resends:settle(self.view, self, self.slots, nil, 0, true) end
  self.tcp:finish(self)
  for d = 0, 1 do
    local s = blank_segment(self.tcp:flow(d).last_data_frame, self.tcp:flow(d).last_data_t)
    local events = self.pdus[d]:finish()
    self:on_pdus(d, s, events, false, nil)
  end
  self:settle(0, true)
  for slot = 1, self.slot_count do  -- in slot order, as the engine
    local c = self.slots[slot]
    if c then
      self:emit_command(c)
      self:release_slot(c)
    end
  end
  self.rules:finish(self, self.max_outstanding, self.first_command_frame)
  self:session_id()  -- the engine's connection facts name a session even without a command
  self.finished = true  -- its facts are final (the engine's on_connection)
  -- Its per-segment records (and the tables kept to refill them) are read no more, only the
  -- flows' facts (session/facts.lua): freed, as the engine frees a finished connection's.
  for d = 0, 1 do
    local f = self.tcp.flow_[d]
    f.ts_firsts, f.tsf_head, f.tsf_tail = {}, 1, 0
    f.unacked, f.ua_head, f.ua_tail, f.ua_free, f.ua_free_n = {}, 1, 0, {}, 0
    f.acks, f.ak_head, f.ak_tail, f.ak_free, f.ak_free_n = {}, 1, 0, {}, 0
  end
end
