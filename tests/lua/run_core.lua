-- SPDX-License-Identifier: GPL-2.0-or-later
--
-- Runs the Lua plugin's analysis core without Wireshark, under any Lua 5.1-5.4 interpreter, on
-- an uncompressed little- or big-endian pcap file, and prints the plugin's text report, or with
-- `json` every command and every finding as JSON lines. tests/lua uses it to check that the core
-- gives the CLI's results under every Lua version Wireshark builds ship with (5.1 up to 4.2, 5.4
-- from 4.4). Packets are decoded as the CLI's fast decoder does (cli/packet_decoder.cpp), so
-- that both see the same segments.
--
--   lua5.x tests/lua/run_core.lua lua/iscsi_doctor.lua capture.pcap [json]
--
-- JSON lines, in emission order: {"type":"command",...} per command and {"type":"finding",...}
-- per finding, with the keys and value forms of `iscsi-doctor --format json` (docs/json-schema.md)
-- plus the finding's "fix"; a last {"type":"end",...} line with counts. time_ns counts from the
-- first packet's whole second ("base_s" in the end line).

local plugin, path, mode = arg[1], arg[2], arg[3]
local core = dofile(plugin)
local f = assert(io.open(path, "rb"))
local data = f:read("*a")
f:close()

local floor = math.floor
local function u8(s, p) return s:byte(p) end
local function be16(s, p) local a, b = s:byte(p, p + 1); return a * 256 + b end
local function be32(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function le32(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((d * 256 + c) * 256 + b) * 256 + a
end

assert(#data >= 24, "not a pcap file")
local magic = be32(data, 1)
local r32, nano
if magic == 0xa1b2c3d4 or magic == 0xa1b23c4d then r32 = be32
else r32 = le32; magic = le32(data, 1) end
nano = magic == 0xa1b23c4d
assert(magic == 0xa1b2c3d4 or magic == 0xa1b23c4d, "not a pcap file")
local snaplen = r32(data, 17)
local linktype = r32(data, 21) % 65536
if snaplen == 0 then snaplen = 262144 end

local an = core.Analyzer.new()
local pos, frame, base = 25, 0, nil

local function ipv4(s, p) return string.format("%d.%d.%d.%d", s:byte(p, p + 3)) end
local function ipv6(s, p)
  local t = {}
  for i = 0, 7 do t[#t + 1] = string.format("%x", be16(s, p + 2 * i)) end
  return table.concat(t, ":")
end

-- TCP: `tcp` is the captured part of the segment (cut at the IP datagram's end), wire_len its
-- length according to IP.
local function decode_tcp(pkt, p, cap_end, wire_len, src, dst, t)
  if cap_end - p < 20 then return end
  local sport, dport = be16(pkt, p), be16(pkt, p + 2)
  local seq, ack = be32(pkt, p + 4), be32(pkt, p + 8)
  local hl = floor(u8(pkt, p + 12) / 16) * 4
  local flags = u8(pkt, p + 13) % 64
  local win = be16(pkt, p + 14)
  if hl < 20 or hl > wire_len then return end
  local mss, ws, sl, sr = 0, -1, 0, 0
  if hl > 20 then  -- MSS and window scale mean something on a SYN only; the first SACK block anywhere
    local syn = flags % 4 >= 2
    local o, oe = p + 20, math.min(p + hl, cap_end)
    while o < oe do
      local kind = u8(pkt, o)
      if kind == 0 then break end
      if kind == 1 then o = o + 1 else
        if o + 1 >= oe then break end
        local len = u8(pkt, o + 1)
        if len < 2 or o + len > oe then break end
        if syn and kind == 2 and len == 4 then mss = be16(pkt, o + 2) end
        if syn and kind == 3 and len == 3 then ws = math.min(u8(pkt, o + 2), 14) end
        if kind == 5 and len >= 10 and sl == sr then sl, sr = be32(pkt, o + 2), be32(pkt, o + 6) end
        o = o + len
      end
    end
  end
  local payload = cap_end > p + hl and pkt:sub(p + hl, cap_end - 1) or ""
  an:feed({ frame = frame, t = t, src = src .. ":" .. sport, dst = dst .. ":" .. dport,
    sport = sport, dport = dport, seq = seq, ack = ack, flags = flags, window = win, mss = mss,
    wscale = ws, options_len = hl - 20, payload = payload, wire_len = wire_len - hl, sack_left = sl, sack_right = sr })
end

-- IP from p to the frame's captured end n (inclusive); extra: bytes the wire had beyond it.
local function decode_ipv4(pkt, p, n, extra, t)
  if n - p + 1 < 20 then return end
  local hl = (u8(pkt, p) % 16) * 4
  if floor(u8(pkt, p) / 16) ~= 4 or hl < 20 or n - p + 1 < hl then return end
  if u8(pkt, p + 9) ~= 6 then return end
  if be16(pkt, p + 6) % 16384 ~= 0 then return end  -- MF or a fragment offset
  local on_wire = n - p + 1 + extra
  local total = be16(pkt, p + 2)
  if total == 0 then total = on_wire end
  if total < hl then return end
  total = math.min(total, on_wire)
  local captured = math.min(total, n - p + 1)
  decode_tcp(pkt, p + hl, p + captured, total - hl, ipv4(pkt, p + 12), ipv4(pkt, p + 16), t)
end

local function decode_ipv6(pkt, p, n, extra, t)
  local have = n - p + 1
  if have < 40 or floor(u8(pkt, p) / 16) ~= 6 then return end
  local on_wire = have + extra
  local total = 40 + be16(pkt, p + 4)
  if total == 40 then total = on_wire end
  total = math.min(total, on_wire)
  local nxt, off = u8(pkt, p + 6), 40
  local depth = 0
  while nxt ~= 6 do
    if depth == 8 then return end
    depth = depth + 1
    local len = 0
    if nxt == 0 or nxt == 43 or nxt == 60 then
      if have >= off + 2 then len = (u8(pkt, p + off + 1) + 1) * 8 end
    elseif nxt == 51 then
      if have >= off + 2 then len = (u8(pkt, p + off + 1) + 2) * 4 end
    elseif nxt == 44 then
      if have >= off + 8 then
        local fo = be16(pkt, p + off + 2)
        if floor(fo / 8) ~= 0 or fo % 2 ~= 0 then return end  -- & 0xfff9
        len = 8
      end
    else
      return
    end
    if len == 0 then return end
    nxt = u8(pkt, p + off)
    off = off + len
    if off > total then return end
  end
  if have < off then return end
  local captured = math.min(total, have)
  decode_tcp(pkt, p + off, p + captured, total - off, "[" .. ipv6(pkt, p + 8) .. "]",
             "[" .. ipv6(pkt, p + 24) .. "]", t)
end

local function decode_ip_any(pkt, p, n, extra, t)
  if p > n then return end
  local v = floor(u8(pkt, p) / 16)
  if v == 4 then decode_ipv4(pkt, p, n, extra, t) elseif v == 6 then decode_ipv6(pkt, p, n, extra, t) end
end

local function decode_ethertype(typ, pkt, p, n, extra, t)
  for _ = 1, 8 do
    if typ == 0x0800 then return decode_ipv4(pkt, p, n, extra, t)
    elseif typ == 0x86dd then return decode_ipv6(pkt, p, n, extra, t)
    elseif typ == 0x8100 or typ == 0x88a8 or typ == 0x9100 then
      if n - p + 1 < 4 then return end
      typ = be16(pkt, p + 2)
      p = p + 4
    elseif typ == 0x8847 or typ == 0x8848 then
      local off = 0
      while true do
        if n - p + 1 < off + 4 then return end
        local bottom = u8(pkt, p + off + 2) % 2 == 1
        off = off + 4
        if bottom then break end
        if off / 4 >= 8 then return end
      end
      return decode_ip_any(pkt, p + off, n, extra, t)
    elseif typ == 0x8864 then
      if n - p + 1 < 8 then return end
      local proto = be16(pkt, p + 6)
      if proto == 0x0021 then return decode_ipv4(pkt, p + 8, n, extra, t)
      elseif proto == 0x0057 then return decode_ipv6(pkt, p + 8, n, extra, t) end
      return
    else
      return
    end
  end
end

local function decode(pkt, extra, t)
  local n = #pkt
  if linktype == 1 then
    if n < 14 then return end
    local typ = be16(pkt, 13)
    if typ <= 1500 then
      if n < 22 or u8(pkt, 15) ~= 0xaa or u8(pkt, 16) ~= 0xaa or u8(pkt, 17) ~= 0x03 then return end
      return decode_ethertype(be16(pkt, 21), pkt, 23, n, extra, t)
    end
    return decode_ethertype(typ, pkt, 15, n, extra, t)
  elseif linktype == 113 then
    if n < 16 then return end
    return decode_ethertype(be16(pkt, 15), pkt, 17, n, extra, t)
  elseif linktype == 276 then
    if n < 20 then return end
    return decode_ethertype(be16(pkt, 1), pkt, 21, n, extra, t)
  elseif linktype == 101 or linktype == 12 or linktype == 14 then
    return decode_ip_any(pkt, 1, n, extra, t)
  elseif linktype == 228 then
    return decode_ipv4(pkt, 1, n, extra, t)
  elseif linktype == 229 then
    return decode_ipv6(pkt, 1, n, extra, t)
  elseif linktype == 0 or linktype == 108 then
    if n < 4 then return end
    return decode_ip_any(pkt, 5, n, extra, t)
  elseif linktype == 9 or linktype == 50 then
    local p = 1
    if n >= 2 and u8(pkt, 1) == 0xff and u8(pkt, 2) == 0x03 then p = 3 end
    if n - p + 1 < 2 then return end
    local proto = be16(pkt, p)
    if proto == 0x0021 then return decode_ipv4(pkt, p + 2, n, extra, t)
    elseif proto == 0x0057 then return decode_ipv6(pkt, p + 2, n, extra, t) end
  end
end

-- Records as the CLI reads them: a record cut short or longer than any snaplen ends the capture.
while true do
  local left = #data - pos + 1
  if left < 16 then break end
  local sec, frac, incl, orig = r32(data, pos), r32(data, pos + 4), r32(data, pos + 8), r32(data, pos + 12)
  if incl > snaplen and incl > 262144 then break end
  if left - 16 < incl then break end
  local cap = math.min(incl, snaplen)
  local pkt = data:sub(pos + 16, pos + 15 + cap)
  pos = pos + 16 + incl
  frame = frame + 1
  if not base then base = sec end
  local t = (sec - base) * 1e9 + (nano and frac or frac * 1000)
  decode(pkt, orig > cap and orig - cap or 0, t)
end
an:finish()

if mode ~= "json" then
  print(an:report())
  return
end

---------------------------------------------------------------------------------------------
-- JSON lines

-- Bytes above 0x7f pass as they are: the reader decodes UTF-8 as the CLI does (invalid -> U+FFFD).
local function jstr(s)
  s = tostring(s)
  s = s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return string.format("\\u%04x", c:byte())
  end)
  return '"' .. s .. '"'
end
local function jnum(v)
  if v == nil then return "null" end
  if v == floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%.0f", v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  return string.format("%.17g", v)
end
local function jframe(v) if not v or v == 0 then return "null" end return jnum(v) end
local function jbool(v) return v and "true" or "false" end
local function obj(pairs_)
  local out = {}
  for i = 1, #pairs_, 2 do out[#out + 1] = jstr(pairs_[i]) .. ":" .. pairs_[i + 1] end
  return "{" .. table.concat(out, ",") .. "}"
end
local function list(items, fn)
  local out = {}
  for i, v in ipairs(items) do out[i] = fn(v) end
  return "[" .. table.concat(out, ",") .. "]"
end

-- As cli/report_common.cpp names them.
local STATUS = { [0x00] = "GOOD", [0x02] = "CHECK_CONDITION", [0x04] = "CONDITION_MET",
  [0x08] = "BUSY", [0x10] = "INTERMEDIATE", [0x14] = "INTERMEDIATE_CONDITION_MET",
  [0x18] = "RESERVATION_CONFLICT", [0x22] = "COMMAND_TERMINATED", [0x28] = "TASK_SET_FULL",
  [0x30] = "ACA_ACTIVE", [0x40] = "TASK_ABORTED" }
local SENSE_KEYS = { [0] = "NO_SENSE", "RECOVERED_ERROR", "NOT_READY", "MEDIUM_ERROR",
  "HARDWARE_ERROR", "ILLEGAL_REQUEST", "UNIT_ATTENTION", "DATA_PROTECT", "BLANK_CHECK",
  "VENDOR_SPECIFIC", "COPY_ABORTED", "ABORTED_COMMAND", "RESERVED_0C", "VOLUME_OVERFLOW",
  "MISCOMPARE", "COMPLETED" }
local BREAKDOWN = { "request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss",
                    "response" }

local out = {}
for _, c in ipairs(an.commands) do
  local bd = {}
  for _, part in ipairs(BREAKDOWN) do
    bd[#bd + 1] = part
    bd[#bd + 1] = jnum(c.breakdown[part] or 0)
  end
  local status = "null"
  if c.scsi_status then
    status = jstr(STATUS[c.scsi_status] or string.format("0x%02x", c.scsi_status))
  end
  local sense = "null"
  if c.sense_key then
    sense = obj({ "key", jnum(c.sense_key), "key_name", jstr(SENSE_KEYS[c.sense_key % 16]),
                  "asc", jnum(c.asc), "ascq", jnum(c.ascq) })
  end
  out[#out + 1] = obj({ "type", '"command"', "session", jnum(c.session), "connection", jnum(c.conn.id),
    "itt", jstr(string.format("0x%08x", c.itt)), "cmdsn", jnum(c.cmdsn),
    "lun", type(c.lun) == "number" and jnum(c.lun) or tostring(c.lun), "op", jstr(c.op),
    "iscsi_opcode", "1", "kind", jstr(c.kind), "lba", c.lba or "null", "bytes", jnum(c.bytes),
    "first_frame", jframe(c.first_frame), "status_frame", jframe(c.status_frame),
    "time_ns", jnum(c.first_t), "latency_ms", c.completed and jnum(c.latency_ms) or "null",
    "round_trips", c.completed and jnum(c.round_trips or 0) or "null", "ideal_round_trips", jnum(c.ideal_round_trips),
    "findings", list(c.findings, jstr), "breakdown_ms", obj(bd), "status", status,
    "response", jnum(c.iscsi_response), "sense", sense, "completed", jbool(c.completed),
    "data_incomplete", jbool(c.data_incomplete) })
end
for _, fd in ipairs(an.findings) do
  local rel = {}
  for _, kv in ipairs(fd.related or {}) do
    rel[#rel + 1] = kv[1]
    rel[#rel + 1] = jnum(kv[2])
  end
  out[#out + 1] = obj({ "type", '"finding"', "kind", jstr(fd.kind), "side", jstr(fd.side),
    "session", jnum(fd.session), "connection", jnum(fd.connection), "frame", jframe(fd.frame),
    "related", obj(rel), "lost_ms", jnum(fd.lost_ms or 0),
    "itt", fd.itt and jstr(string.format("0x%08x", fd.itt)) or "null",
    "command_first_frame", jframe(fd.command_first_frame), "detail", jstr(fd.detail or ""),
    "inferred", list(fd.inferred or {}, jstr), "fix", jstr(fd.fix) })
end
-- Connection facts and sessions, as the CLI lists them (sessions[].connections[]).
local function ms_or_null(r) if not r.known then return "null" end return jnum(r.min / 1e6) end
local conns = {}
for _, c in ipairs(an.connections) do conns[#conns + 1] = c end
table.sort(conns, function(a, b) return a.id < b.id end)
for _, c in ipairs(conns) do
  local ri, rt = c.rtt[0], c.rtt[1]
  local f = c:facts()
  local fr = { c.pdus[0].framer, c.pdus[1].framer }
  local keys = {}
  for _, kv in ipairs(f.keys) do keys[#keys + 1] = kv[1]; keys[#keys + 1] = jstr(kv[2]) end
  out[#out + 1] = obj({ "type", '"connection"', "connection", jnum(c.id), "session", jnum(c.session),
    "rtt_initiator_ms", ms_or_null(ri), "rtt_target_ms", ms_or_null(rt),
    "rtt_ms", f.rtt_ms and jnum(f.rtt_ms) or "null",
    "rtt_source", obj({ "initiator", jstr(f.rtt_source_initiator), "target", jstr(f.rtt_source_target) }),
    "vantage", jstr(f.vantage),
    "mss", obj({ "initiator", jnum(f.mss_initiator), "target", jnum(f.mss_target),
                 "inferred", jbool(f.mss_inferred),
                 "source", obj({ "initiator", jstr(f.mss_source_initiator), "target", jstr(f.mss_source_target) }) }),
    "window_scale", obj({ "initiator", jnum(f.wscale_initiator), "target", jnum(f.wscale_target),
                          "inferred", jbool(f.wscale_inferred) }),
    "offload_segments", jnum(f.offload_segments),
    "keys", obj(keys),
    "header_digest", jbool(c.header_digest or fr[1].hd == "on"),
    "data_digest", jbool(c.data_digest or fr[1].dd == "on"),
    "saw_handshake", jbool(c.saw_syn), "saw_login", jbool(c.saw_login),
    "mid_session_start", jbool(c.mid_session),
    "counts", obj({ "frames", jnum(c.frames), "pdus", jnum(fr[1].pdus + fr[2].pdus),
                    "commands", jnum(c.commands), "resyncs", jnum(fr[1].resyncs + fr[2].resyncs),
                    "digest_errors", jnum(c.digest_errors),
                    "bytes_missing", jnum(c.flow[0].bytes_missing + c.flow[1].bytes_missing),
                    "max_outstanding", jnum(c.max_outstanding),
                    "never_answered", jnum(c.commands - math.min(c.completed, c.commands)) }) })
end
local function str_or_null(v) if not v or v == "" then return "null" end return jstr(v) end
for _, se in ipairs(an.sessions) do
  out[#out + 1] = obj({ "type", '"session"', "session", jnum(se.id),
    "initiator_name", str_or_null(se.initiator_name), "target_name", str_or_null(se.target_name),
    "session_type", str_or_null(se.session_type), "isid", str_or_null(se.isid),
    "tsih", jnum(se.tsih or 0), "connections", list(se.connections, jnum) })
end
out[#out + 1] = obj({ "type", '"end"', "commands", jnum(#an.commands), "findings", jnum(#an.findings),
  "connections", jnum(#an.connections), "sessions", jnum(#an.sessions), "frames", jnum(frame),
  "base_s", jnum(base or 0) })
io.write(table.concat(out, "\n"), "\n")
