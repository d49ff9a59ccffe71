---------------------------------------------------------------------------------------------
-- The critical path (engine/src/session/critical_path.cpp; docs/rules.md "The critical path"):
-- each segment carrying bytes of a command is a path event of it.

-- (on_pdus, path_event_for_start and analyse_path_event run for every segment with iSCSI bytes:
-- they call each other, on_pdu_end and the holds as upvalues, not as methods)
do
local analyse_path_event, path_event_for_start
local on_pdu_end = Connection.on_pdu_end
local holds_on_wait, holds_on_release = Holds.on_wait, Holds.on_release
function Connection:on_pdus(dir, seg, events, began_mid, mid_slot)
  -- Path events (slot, role, response): the first in locals (the usual one), more in lists.
  local n, s1, r1, p1, t_slot, t_role, t_resp = 0, nil, nil, nil, nil, nil, nil
  local none = NO_HOLD
  -- Path events name slots, as in the engine: a slot released and taken again by a command started
  -- in this segment is that command's.
  if began_mid and self.slots[mid_slot] then
    local e = events[1]
    if e and e.type == "end" and e.last_frame and e.last_frame ~= 0 and e.last_frame ~= seg.frame then
      analyse_path_event(self, dir, { frame = e.last_frame, t = e.last_t }, mid_slot, "cont", nil, none)
    else
      n, s1, r1 = 1, mid_slot, "cont"
    end
  end
  for k = 1, #events do  -- (a numeric loop: ipairs is a call per element)
    local ev = events[k]
    if ev.type == "start" then
      local c, role = path_event_for_start(self, dir, ev, seg)
      self.current_slot[dir] = c
      local response = ev.bhs.opcode == OP.ScsiResponse
      if c and role ~= "start" and ev.first_frame and ev.first_frame ~= 0 and ev.first_frame ~= seg.frame then
        analyse_path_event(self, dir, { frame = ev.first_frame, t = ev.first_t }, c.slot, role, response, none)
        local e = events[k + 1]
        if e and e.type == "end" and e.last_frame and e.last_frame ~= 0 and e.last_t > ev.first_t then
          analyse_path_event(self, dir, { frame = e.last_frame, t = e.last_t }, c.slot, "cont", response, none)
        end
      elseif c and n < 8 and role ~= "start" then
        local dup = n >= 1 and s1 == c.slot
        for i = 2, n do if t_slot[i] == c.slot then dup = true end end
        if not dup then
          n = n + 1
          if n == 1 then
            s1, r1, p1 = c.slot, role, ev.bhs.opcode == OP.ScsiResponse
          else
            if n == 2 then t_slot, t_role, t_resp = {}, {}, {} end
            t_slot[n], t_role[n], t_resp[n] = c.slot, role, ev.bhs.opcode == OP.ScsiResponse
          end
        end
      end
    end
  end
  -- The first path event judging a hold gives the segment its verdict; the others share it.
  local verdict = NOT_JUDGED
  if n >= 1 then verdict = analyse_path_event(self, dir, seg, s1, r1, p1, verdict) end
  for i = 2, n do verdict = analyse_path_event(self, dir, seg, t_slot[i], t_role[i], t_resp[i], verdict) end
  for k = 1, #events do
    local ev = events[k]
    if ev.type == "end" then on_pdu_end(self, dir, seg, ev) end
  end
end

function Connection:path_event_for_start(dir, ev, seg)
  local b = ev.bhs
  local op = b.opcode
  if dir == I2T and op == OP.ScsiCommand then
    if b.itt == RESERVED_TAG then return nil end
    local old = self.by_itt[b.itt]
    if old then
      self:emit_command(old)
      self:release_slot(old)
    end
    if self.open_count >= self.opt.max_open_commands then return nil end
    local w = hasbit(b.flags, 0x20)
    local slot = #self.free_slots
    if slot > 0 then
      slot, self.free_slots[slot] = self.free_slots[slot], nil
    else
      self.slot_count = self.slot_count + 1
      slot = self.slot_count
    end
    local c = { used = true, conn = self, slot = slot, session = self:session_id(), itt = b.itt,
      cmdsn = b.w24, bytes = b.w20, lun = lun_number(b.lun_hi, b.lun_lo),
      first_frame = ev.first_frame ~= 0 and ev.first_frame or seg.frame,
      first_t = ev.first_frame ~= 0 and ev.first_t or seg.t,
      write = w, findings_set = {}, findings = {},
      breakdown = new_breakdown(), h_initiator = 1, h_target = 0, last_event_t = 0,
      last_seg_t = { [0] = seg.t, [1] = 0 }, has_seg = { [0] = true, [1] = false },
      needed_t = 0, request_done = false, r2ts = 0, first_r2t_frame = 0, last_r2t_t = 0,
      h_at_r2t = 0, first_reply_frame = 0, solicited_data = false, data_out_bytes = 0,
      data_in_bytes = 0, loss_pending_ms = 0, completed = false,
      data_incomplete = false }
    local cdir, _
    c.op, cdir, _, c.lba = decode_cdb(b.cdb)
    c.kind = c.lba and (cdir == "read" and "read" or "write") or "other"
    if not self.keys.from_login and w and b.data_length > 0 then self.keys.immediate_data = true end
    if w then
      c.unsolicited_expected = min(b.w20, self.keys.initial_r2t and 0 or self.keys.first_burst)
    else
      c.unsolicited_expected = 0
    end
    c.ideal_round_trips = ideal_round_trips(self.keys, w, w and b.w20 or 0)
    -- The link (rules/link_limited.lua): the data flow's busy time when the command began, the
    -- half trips its holds add, and their findings, given when it is reported.
    local df = self.tcp:flow(w and I2T or T2I)
    c.link_busy0, c.link_bytes0, c.link_busy_reply = df:link_meter().busy_ns, df.link.busy_bytes, -1
    c.held_h, c.held_findings = 0, {}
    c.undecided_ms, c.undecided_ack_frame, c.unsure_ms, c.bound_ms = 0, 0, 0, 0
    c.last_event_t = c.first_t
    self.slots[slot] = c
    self.by_itt[b.itt] = c
    self.open_count = self.open_count + 1
    self.commands = self.commands + 1
    self.outstanding = self.outstanding + 1
    -- Small counts are judged by capture time when commands complete (in_flight_with).
    if self.outstanding > COUNTED_IN_FLIGHT then
      self.max_outstanding = max(self.max_outstanding, self.outstanding)
    end
    if self.first_command_frame == 0 then self.first_command_frame = c.first_frame end
    return c, "start"
  end
  if b.itt == RESERVED_TAG then return nil end
  local c = self.by_itt[b.itt]
  if not c then return nil end
  local role
  if op == OP.DataOut then
    if b.w20 ~= RESERVED_TAG then
      role = c.solicited_data and "cont" or "solicited"
      c.solicited_data = true
    else
      role = "cont"
      if self.keys.initial_r2t and not self.keys.from_login then
        self.keys.initial_r2t = false
        self.keys.initial_r2t_inferred = true
      end
    end
  elseif op == OP.R2T then
    role = "reply"
    c.solicited_data = false
  elseif op == OP.DataIn or op == OP.ScsiResponse then
    role = c.has_seg[T2I] and "cont" or "reply"
    if op == OP.ScsiResponse and c.write and c.r2ts > 0 then role = "reply" end
  else
    return nil
  end
  return c, role
end

path_event_for_start = Connection.path_event_for_start

-- Returns the verdict, the segment's own once a hold was judged (see NOT_JUDGED).
function Connection:analyse_path_event(dir, seg, slot, role, response, verdict)
  local c = self.slots[slot]
  if not c then return verdict end
  local has_seg = c.has_seg
  local now = seg.t
  local r = self.tcp.rtt_[dir]  -- (rtt_ns and its accessors written out: this runs for every segment)
  local rtt_side = r.known_ and r.min_ or 0
  local ready
  if role == "cont" then
    ready = has_seg[dir] and c.last_seg_t[dir] or c.last_event_t
  elseif role == "solicited" then
    ready = c.last_r2t_t + rtt_side
  else
    ready = c.needed_t + rtt_side
  end
  local interval = now - c.last_event_t
  interval = 0 > interval and 0 or interval
  local crossing = ready - c.last_event_t
  crossing = crossing > 0 and crossing or 0
  crossing = crossing < interval and crossing or interval
  local rest = interval - crossing
  local bd = c.breakdown
  local reply = role == "reply"
  local solicited = role == "solicited"
  -- Half trips: a reply or solicited data is one crossing after what it answers; a hold found
  -- below adds the peer's ACK crossing and this segment's own on top of that.
  if reply then c.h_target = max(c.h_target, c.h_initiator + 1) end
  if solicited then c.h_initiator = max(c.h_initiator, c.h_at_r2t + 1) end
  if crossing > 0 then
    -- Timed by pure ACKs as late as a delayed ACK: any part of it may be the target's own time.
    if reply and r:bound_by_pure_acks() and ms(rtt_side) >= self.view.options.delayed_ack_min_ms then
      c.unsure_ms = c.unsure_ms + ms(crossing)
    end
    -- Timed by a round trip that may hold the answering side's own time (serialized).
    if (reply or solicited) and r:may_hold_side_time(floor(self.view.options.delayed_ack_min_ms * 1e6 + 0.5)) then
      c.bound_ms = c.bound_ms + ms(crossing)
    end
    if solicited or (reply and c.r2ts > 0) then bd.r2t = bd.r2t + ms(crossing)
    else bd.request = bd.request + ms(crossing) end
  end
  local wait_min = wait_min_ns(self.tcp.full_)
  local rest_ms = rest / 1e6
  local loss = c.loss_pending_ms < rest_ms and c.loss_pending_ms or rest_ms
  if loss > 0 then
    bd.loss = bd.loss + loss
    c.loss_pending_ms = c.loss_pending_ms - loss
    rest = rest - trunc(loss * 1e6)
  end
  if rest > wait_min then
    rest, verdict = holds_on_wait(self.rules.holds, self.view, self, dir, seg, c, ready, rest, verdict)
  end
  if role == "cont" and has_seg[dir] and not verdict.reported then  -- no wait of its own judged
    holds_on_release(self.rules.holds, self.view, dir, seg, c)
  end
  if rest > 0 then
    if dir == T2I and (reply or rest > wait_min) then bd.think = bd.think + ms(rest)
    elseif solicited then bd.r2t = bd.r2t + ms(rest)
    elseif response then bd.response = bd.response + ms(rest)
    elseif dir == I2T then bd.request = bd.request + ms(rest)
    elseif has_seg[T2I] then bd.data = bd.data + rest / 1e6
    else bd.request = bd.request + ms(rest) end
  end
  if reply and c.first_reply_frame == 0 then
    c.first_reply_frame = seg.frame
    c.link_busy_reply = self.tcp:flow(c.write and I2T or T2I):link_meter().busy_ns
  end
  self.seg_h = dir == I2T and c.h_initiator or c.h_target
  self.seg_cmd = c.first_frame
  self.seg_itt = c.itt
  c.last_event_t = c.last_event_t > now and c.last_event_t or now
  c.last_seg_t[dir] = now
  has_seg[dir] = true
  return verdict
end
analyse_path_event = Connection.analyse_path_event
end

-- The reply was framed before (or while) its command was: its time still counts on the critical
-- path, but no hold can be judged on a timeline that has moved on.
function Connection:late_reply_events(c, seg, ev)
  local none = NO_HOLD
  local response = ev.bhs.opcode == OP.ScsiResponse
  local first, last = seg, seg
  if ev.first_frame and ev.first_frame ~= 0 then first = { frame = ev.first_frame, t = ev.first_t } end
  if ev.last_frame and ev.last_frame ~= 0 then last = { frame = ev.last_frame, t = ev.last_t } end
  self:analyse_path_event(T2I, first, c.slot, c.has_seg[T2I] and "cont" or "reply", response, none)
  if last.t > first.t then
    self:analyse_path_event(T2I, last, c.slot, "cont", response, none)
  end
end
