---------------------------------------------------------------------------------------------
-- The critical path (engine/src/session/critical_path.cpp; docs/rules.md "The critical path"):
-- each segment carrying bytes of a command is a path event of it.

-- A verdict already given (read only): framing found late (a stream joined mid-session is framed
-- once the next header confirms it) places a PDU carried by earlier segments at those segments,
-- with no hold judged.
local NO_HOLD = { held = false, reported = true }
-- The verdict of a segment not judged yet (read only: analyse_path_event makes the segment's own).
local NOT_JUDGED = { held = false, reported = false }

function Connection:on_pdus(dir, seg, events, began_mid, mid_slot)
  -- Path events (slot, role, response): the first in locals (the usual one), more in lists.
  local n, s1, r1, p1, t_slot, t_role, t_resp = 0, nil, nil, nil, nil, nil, nil
  local none = NO_HOLD
  -- Path events name slots, as in the engine: a slot released and taken again by a command started
  -- in this segment is that command's.
  if began_mid and self.slots[mid_slot] then
    local e = events[1]
    if e and e.type == "end" and e.last_frame and e.last_frame ~= 0 and e.last_frame ~= seg.frame then
      self:analyse_path_event(dir, { frame = e.last_frame, t = e.last_t }, mid_slot, "cont", nil, none)
    else
      n, s1, r1 = 1, mid_slot, "cont"
    end
  end
  for k = 1, #events do  -- (a numeric loop: ipairs is a call per element)
    local ev = events[k]
    if ev.type == "start" then
      local c, role = self:path_event_for_start(dir, ev, seg)
      self.current_slot[dir] = c
      local response = ev.bhs.opcode == OP.ScsiResponse
      if c and role ~= "start" and ev.first_frame and ev.first_frame ~= 0 and ev.first_frame ~= seg.frame then
        self:analyse_path_event(dir, { frame = ev.first_frame, t = ev.first_t }, c.slot, role, response, none)
        local e = events[k + 1]
        if e and e.type == "end" and e.last_frame and e.last_frame ~= 0 and e.last_t > ev.first_t then
          self:analyse_path_event(dir, { frame = e.last_frame, t = e.last_t }, c.slot, "cont", response, none)
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
  if n >= 1 then verdict = self:analyse_path_event(dir, seg, s1, r1, p1, verdict) end
  for i = 2, n do verdict = self:analyse_path_event(dir, seg, t_slot[i], t_role[i], t_resp[i], verdict) end
  for k = 1, #events do
    local ev = events[k]
    if ev.type == "end" then self:on_pdu_end(dir, seg, ev) end
  end
end

local function new_breakdown()
  return { request = 0, think = 0, data = 0, nagle = 0, delayed_ack = 0, r2t = 0, window = 0,
           loss = 0, response = 0, link = 0, cwnd = 0, rwnd = 0 }  -- cwnd + rwnd: window's parts
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
      data_in_bytes = 0, loss_pending_ms = 0, hold_ms = 0, completed = false,
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
    c.undecided_ms, c.undecided_ack_frame = 0, 0
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

local WAIT_MIN_FLOOR_NS = floor(RULES.wait_min_ms * 1e6 + 0.5)  -- (a constant: once, not per segment)
-- A rest longer than this is a wait (engine: wait_min_ns).
function Connection:wait_min_ns()
  local wait_rtt = floor(self:full_rtt_ns() / RULES.wait_min_rtt_divisor)
  return WAIT_MIN_FLOOR_NS > wait_rtt and WAIT_MIN_FLOOR_NS or wait_rtt
end

-- Window arithmetic (engine: window_edge_half_trips): more of a flight past the edge the ACKs had
-- offered could leave only once an ACK opening that far reached the sender; without a wait of
-- its own it still counts that ACK's crossings.
function Connection:window_edge_half_trips(dir, seg, c)
  local f = self.tcp:flow(dir)
  if not self.tcp:rtt(dir):known() then return end
  local i = f:first_opening(f:first_wire_end(seg.seq, seg.wire_len))
  if i > f.ak_tail then return end
  self:release_half_trips(dir, seg, c, f.acks[i])  -- the first ACK that opened the window this far
end

-- ACK causality by timestamps (engine: echo_half_trips): a data segment echoing a newer timestamp
-- than the data before it was released by an ACK in between (the first with that timestamp, at the
-- least): two crossings after the data that ACK acknowledged.
function Connection:echo_half_trips(dir, seg, c)
  local f = self.tcp:flow(dir)
  if not seg.has_ts or f.echo_moved_frame ~= seg.frame or not self.tcp:rtt(dir):known() then return end
  local i = f:first_with_ts(seg.tsecr)
  if i <= f.ak_tail then self:release_half_trips(dir, seg, c, f.acks[i]) end
end

-- A segment released by ACK r without a wait of its own (engine: release_half_trips): two
-- crossings after the data r acknowledged, when that was this command's and r could have reached
-- the sender by then.
function Connection:release_half_trips(dir, seg, c, r)
  if r.h < 0 or r.cmd ~= c.first_frame or r.t + self:rtt_ns(dir) - self:tolerance_ns() > seg.t then return end
  local h = dir == I2T and c.h_initiator or c.h_target
  if r.h + 2 > h then
    c.held_h = c.held_h + r.h + 2 - h  -- as a hold's (a link-bound command takes them back)
    if dir == I2T then c.h_initiator = r.h + 2 else c.h_target = r.h + 2 end
  end
end

-- Returns the verdict, the segment's own once a hold was judged (see NOT_JUDGED).
function Connection:analyse_path_event(dir, seg, slot, role, response, verdict)
  local c = self.slots[slot]
  if not c then return verdict end
  local now = seg.t
  local r = self.tcp.rtt_[dir]  -- (rtt_ns and its accessors written out: this runs for every segment)
  local rtt_side = r.known_ and r.min_ or 0
  local ready
  if role == "cont" then
    ready = c.has_seg[dir] and c.last_seg_t[dir] or c.last_event_t
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
    if solicited or (reply and c.r2ts > 0) then bd.r2t = bd.r2t + ms(crossing)
    else bd.request = bd.request + ms(crossing) end
  end
  local wait_min = self:wait_min_ns()
  local rest_ms = rest / 1e6
  local loss = c.loss_pending_ms < rest_ms and c.loss_pending_ms or rest_ms
  if loss > 0 then
    bd.loss = bd.loss + loss
    c.loss_pending_ms = c.loss_pending_ms - loss
    rest = rest - trunc(loss * 1e6)
  end
  if rest > wait_min then
    if not verdict.reported then
      local v = self:classify_hold(dir, seg, ready)
      if verdict == NOT_JUDGED then verdict = { held = false, reported = false } end
      for k, val in pairs(v) do verdict[k] = val end
      verdict.reported = true
      if verdict.held then self:report_hold(dir, seg, c, verdict, ms(rest)) end
    end
    if verdict.undecided then
      c.undecided_ms = c.undecided_ms + ms(rest)
      c.undecided_ack_frame = verdict.release_frame
    end
    if verdict.held then
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
      c.hold_ms = c.hold_ms + held_ms
      self:add_finding_kind(c, verdict.kind)
      if dack > 0 then self:add_finding_kind(c, "delayed_ack") end
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
      rest = 0
    end
  end
  if role == "cont" and c.has_seg[dir] and not verdict.reported then  -- no wait of its own judged
    self:window_edge_half_trips(dir, seg, c)
    self:echo_half_trips(dir, seg, c)
  end
  if rest > 0 then
    if dir == T2I and (reply or rest > wait_min) then bd.think = bd.think + ms(rest)
    elseif solicited then bd.r2t = bd.r2t + ms(rest)
    elseif response then bd.response = bd.response + ms(rest)
    elseif dir == I2T then bd.request = bd.request + ms(rest)
    elseif c.has_seg[T2I] then bd.data = bd.data + rest / 1e6
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
  c.has_seg[dir] = true
  return verdict
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
