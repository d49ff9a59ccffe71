-- SPDX-License-Identifier: GPL-2.0-or-later
--
-- Runs the Lua plugin's analysis core without Wireshark, under any Lua 5.1-5.4 interpreter, on
-- an uncompressed little- or big-endian pcap file, and prints the plugin's text report, or with
-- `json` every command and every finding as JSON lines. tests/lua uses it to check that the core
-- gives the CLI's results under every Lua version Wireshark builds ship with (5.1 up to 4.2, 5.4
-- from 4.4). Packets are decoded as the CLI's fast decoder does (engine/src/net/packet_decoder.cpp), so
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

-- Frames are decoded by the plugin's own decoder (a port of engine/src/net/packet_decoder.cpp).
local decode = core.PacketDecoder.fast_decoder(linktype)
local seg = {}

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
  if decode and decode(pkt, #pkt, orig > #pkt and orig - #pkt or 0, seg) then
    -- A sub-second field out of range: in 32 bits, signed, as Wireshark (and the CLI) take it.
    local sub = nano and frac or frac * 1000
    if sub >= 1e9 then
      sub = sub % 4294967296
      if sub >= 2147483648 then sub = sub - 4294967296 end
    end
    seg.frame, seg.t = frame, (sec - base) * 1e9 + sub
    an:feed(seg)
  end
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

-- As the SCSI table names them (engine/src/scsi/table.def, copied into the core).
local STATUS, SENSE_KEYS = core.SCSI_STATUS, core.SCSI_SENSE_KEY
local BREAKDOWN = { "request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss",
                    "response", "link" }

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
local conns = {}
for _, c in ipairs(an.connections) do conns[#conns + 1] = c end
table.sort(conns, function(a, b) return a.id < b.id end)
for _, c in ipairs(conns) do
  local f = c:info()
  local keys = {}
  for _, kv in ipairs(f.keys) do keys[#keys + 1] = kv[1]; keys[#keys + 1] = jstr(kv[2]) end
  out[#out + 1] = obj({ "type", '"connection"', "connection", jnum(f.id), "session", jnum(f.session),
    "rtt_initiator_ms", f.rtt_initiator_ms and jnum(f.rtt_initiator_ms) or "null",
    "rtt_target_ms", f.rtt_target_ms and jnum(f.rtt_target_ms) or "null",
    "rtt_ms", f.rtt_ms and jnum(f.rtt_ms) or "null",
    "rtt_source", obj({ "initiator", jstr(f.rtt_source_initiator), "target", jstr(f.rtt_source_target) }),
    "vantage", jstr(f.vantage),
    "mss", obj({ "initiator", jnum(f.mss_initiator), "target", jnum(f.mss_target),
                 "inferred", jbool(f.mss_inferred),
                 "source", obj({ "initiator", jstr(f.mss_source_initiator), "target", jstr(f.mss_source_target) }) }),
    "window_scale", obj({ "initiator", jnum(f.wscale_initiator), "target", jnum(f.wscale_target),
                          "inferred", jbool(f.wscale_inferred) }),
    "offload_segments", jnum(f.offload_segments),
    "nagle_off_frame", obj({ "initiator", jnum(f.nagle_off_frame_initiator), "target", jnum(f.nagle_off_frame_target) }),
    "keys", obj(keys),
    "header_digest", jbool(f.header_digest),
    "data_digest", jbool(f.data_digest),
    "saw_handshake", jbool(f.saw_handshake), "saw_login", jbool(f.saw_login),
    "mid_session_start", jbool(f.mid_session_start),
    "counts", obj({ "frames", jnum(f.frames), "pdus", jnum(f.pdus),
                    "commands", jnum(f.commands), "resyncs", jnum(f.resyncs),
                    "digest_errors", jnum(f.digest_errors),
                    "bytes_missing", jnum(f.bytes_missing),
                    "max_outstanding", jnum(f.max_outstanding),
                    "never_answered", jnum(f.never_answered) }) })
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
