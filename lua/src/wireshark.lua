---------------------------------------------------------------------------------------------
-- Wireshark glue

if not rawget(_G, "Proto") then
  return core  -- loaded outside Wireshark (plain Lua): the analysis core only
end

local proto = Proto("iscsi_doctor_lua", "iSCSI Doctor (Lua)")
-- One vocabulary with the C plugin (dissector/README.md "Fields"): the same names, types and
-- meanings under iscsi_doctor_lua. as under iscsi_doctor. (tests/lua compares the two).
local pf = {
  command = ProtoField.none("iscsi_doctor_lua.command", "Command"),
  itt = ProtoField.uint32("iscsi_doctor_lua.itt", "ITT", base.HEX),
  op = ProtoField.string("iscsi_doctor_lua.op", "Operation"),
  session = ProtoField.uint32("iscsi_doctor_lua.session", "Session"),
  connection = ProtoField.uint32("iscsi_doctor_lua.connection", "Connection"),
  first_frame = ProtoField.framenum("iscsi_doctor_lua.first_frame", "Command's first frame"),
  status_frame = ProtoField.framenum("iscsi_doctor_lua.status_frame", "Status frame"),
  command_frame = ProtoField.framenum("iscsi_doctor_lua.command_frame", "Command"),
  round_trips = ProtoField.int32("iscsi_doctor_lua.round_trips", "Round trips"),
  ideal_round_trips = ProtoField.int32("iscsi_doctor_lua.ideal_round_trips", "Ideal round trips"),
  excess_round_trips = ProtoField.int32("iscsi_doctor_lua.excess_round_trips", "Excess round trips"),
  latency_ms = ProtoField.double("iscsi_doctor_lua.latency_ms", "Latency (ms)"),
  lba = ProtoField.uint64("iscsi_doctor_lua.lba", "LBA"),
  lun = ProtoField.uint64("iscsi_doctor_lua.lun", "LUN", base.DEC, nil, nil, "The logical unit"),
  bytes = ProtoField.uint32("iscsi_doctor_lua.bytes", "Bytes"),
  scsi_status = ProtoField.uint8("iscsi_doctor_lua.scsi_status", "SCSI status", base.HEX),
  command_finding = ProtoField.string("iscsi_doctor_lua.command_finding", "Command finding"),
  breakdown = ProtoField.none("iscsi_doctor_lua.breakdown", "Breakdown"),
  finding_tree = ProtoField.none("iscsi_doctor_lua.finding_tree", "Finding"),
  finding = ProtoField.string("iscsi_doctor_lua.finding", "Finding"),
  side = ProtoField.string("iscsi_doctor_lua.side", "Side"),
  lost_ms = ProtoField.double("iscsi_doctor_lua.lost_ms", "Time lost (ms)"),
  fix = ProtoField.string("iscsi_doctor_lua.fix", "Fix"),
  detail = ProtoField.string("iscsi_doctor_lua.detail", "Detail"),
  inferred = ProtoField.string("iscsi_doctor_lua.inferred", "Inferred",
    "A fact this verdict rests on that the capture did not show: mss, window_scale, keys"),
  evidence_frame = ProtoField.framenum("iscsi_doctor_lua.evidence_frame", "Evidence frame"),
  finding_itt = ProtoField.uint32("iscsi_doctor_lua.finding_itt", "Delayed command ITT", base.HEX),
  command_first_frame = ProtoField.framenum("iscsi_doctor_lua.command_first_frame",
                                            "Delayed command's first frame"),
  related_frame = ProtoField.framenum("iscsi_doctor_lua.related_frame", "Related frame"),
  -- The command's connection: what the capture showed of it, and what was inferred.
  conn = ProtoField.none("iscsi_doctor_lua.connection.facts", "Connection facts"),
  conn_rtt_ms = ProtoField.double("iscsi_doctor_lua.connection.rtt_ms", "RTT (ms)"),
  conn_vantage = ProtoField.string("iscsi_doctor_lua.connection.vantage", "Capture point"),
  conn_joined = ProtoField.bool("iscsi_doctor_lua.connection.joined", "Joined mid-session"),
  conn_mss = ProtoField.string("iscsi_doctor_lua.connection.mss", "MSS"),
  conn_window_scale = ProtoField.string("iscsi_doctor_lua.connection.window_scale", "Window scale"),
  conn_keys = ProtoField.string("iscsi_doctor_lua.connection.keys", "Keys"),
  conn_offload = ProtoField.uint32("iscsi_doctor_lua.connection.offload_segments", "Offload segments"),
  conn_rtt_source = ProtoField.string("iscsi_doctor_lua.connection.rtt_source", "RTT from"),
}
-- Related frames by their role (the engine's names), as the C plugin's fields.
local RELATED = { released_by = "Released by", acks = "Acknowledges", released = "Released",
                  previous_small = "Previous small segment", original = "Original" }
for role, title in pairs(RELATED) do
  pf["rel_" .. role] = ProtoField.framenum("iscsi_doctor_lua." .. role, title)
end
-- Latency breakdown of a command (docs/rules.md "Latency breakdown"): the parts add up.
local BREAKDOWN = { "request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss",
                    "response" }
local BREAKDOWN_TITLE = { request = "Request", think = "Target think", data = "Data", nagle = "Nagle",
                          delayed_ack = "Delayed ACK", r2t = "R2T", window = "Window", loss = "Loss",
                          response = "Response" }
for _, part in ipairs(BREAKDOWN) do
  pf["bd_" .. part] = ProtoField.double("iscsi_doctor_lua.breakdown." .. part .. "_ms",
                                        BREAKDOWN_TITLE[part] .. " (ms)")
end
local all_fields = {}
for _, v in pairs(pf) do all_fields[#all_fields + 1] = v end
proto.fields = all_fields

-- One expert field per finding kind, as the C plugin's: Warning for the network holds and losses,
-- Note for what is a protocol or target choice.
local NOTE_KINDS = { r2t_round_trip = true, target_think = true, serialized = true }
local ef = {
  slow = ProtoExpert.new("iscsi_doctor_lua.expert.excess_round_trips",
                         "Command needed more round trips than ideal", expert.group.SEQUENCE, expert.severity.NOTE),
}
local experts = { ef.slow }
for _, kind in ipairs(FINDING_KINDS) do
  ef[kind] = ProtoExpert.new("iscsi_doctor_lua.expert." .. kind, "iscsi-doctor finding: " .. kind,
                             expert.group.SEQUENCE, NOTE_KINDS[kind] and expert.severity.NOTE or expert.severity.WARN)
  experts[#experts + 1] = ef[kind]
end
proto.experts = experts

proto.prefs.ports = Pref.string("iSCSI target ports", "3260", "Comma-separated TCP ports of iSCSI targets")
proto.prefs.detect_ports = Pref.bool("Detect iSCSI on other ports", true,
  "Follow connections on other ports that start with a Login Request")
proto.prefs.report = Pref.bool("Print report at the end (tshark)", false,
  "Print the text report when tshark finishes (as the Tools menu window shows it)")

local F = {}
local function fld(name)
  local ok, f = pcall(Field.new, name)
  if ok then F[name] = f end
end
for _, n in ipairs({ "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport",
  "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.window_size_value",
  "tcp.options.mss_val", "tcp.options.wscale.shift", "tcp.len", "tcp.hdr_len", "tcp.payload",
  "tcp.options.sack" }) do
  fld(n)
end
-- The extractors as upvalues (a field this Wireshark lacks reads as absent).
local function absent() return nil end
local function fx(name) return F[name] or absent end
local f_time, f_ip_src, f_ip_dst, f_ip6_src, f_ip6_dst = fx("frame.time_epoch"), fx("ip.src"), fx("ip.dst"),
  fx("ipv6.src"), fx("ipv6.dst")
local f_srcport, f_dstport, f_seq, f_ack, f_flags = fx("tcp.srcport"), fx("tcp.dstport"), fx("tcp.seq_raw"),
  fx("tcp.ack_raw"), fx("tcp.flags")
local f_window, f_mss, f_wscale, f_len, f_hdr_len, f_payload = fx("tcp.window_size_value"),
  fx("tcp.options.mss_val"), fx("tcp.options.wscale.shift"), fx("tcp.len"), fx("tcp.hdr_len"), fx("tcp.payload")
local f_sack = fx("tcp.options.sack")

-- Per-packet garbage (segments, payload copies, field userdata) dies young: Lua 5.4's generational
-- collector frees it without re-marking the whole heap each cycle (half the plugin's time on 4.4).
if _VERSION >= "Lua 5.4" then pcall(collectgarbage, "generational") end

local state = nil
local base_secs = nil

local function options_from_prefs()
  local o = {}
  for k, v in pairs(DEFAULT_OPTIONS) do o[k] = v end
  o.ports = {}
  for n in tostring(proto.prefs.ports or "3260"):gmatch("%d+") do o.ports[tonumber(n)] = true end
  o.detect_ports = proto.prefs.detect_ports
  return o
end

function proto.init()
  state = Analyzer.new(options_from_prefs())
  base_secs = nil
end

local function range_raw(fi) return fi.range:raw() end
local function unhex(h) return string.char(tonumber(h, 16)) end

-- One segment table, refilled for every frame: the core keeps copies of a segment, never the
-- table itself (less garbage per packet). Every key is set each time.
local seg = { frame = 0, t = 0, src = "", dst = "", sport = 0, dport = 0, seq = 0, ack = 0, flags = 0,
              window = 0, mss = 0, wscale = -1, options_len = 0, payload = "", wire_len = 0,
              sack_left = 0, sack_right = 0 }

-- The first SACK block as on the wire (the option's bytes: Wireshark's edge fields are relative).
local function sack_edges(fi)
  local r = fi.range
  return r:range(2, 4):uint(), r:range(6, 4):uint()
end

-- te: frame.time_epoch's FieldInfo when the caller has it already.
local function feed_frame(pinfo, te)
  local len_fi = f_len()
  if not len_fi then return end
  local srcport, dstport = f_srcport(), f_dstport()
  local seq, ack = f_seq(), f_ack()
  local flags = f_flags()
  if not (srcport and dstport and seq and flags) then return end
  local src, dst = f_ip_src(), f_ip_dst()
  if not src then src, dst = f_ip6_src(), f_ip6_dst() end
  if not src or not dst then return end
  te = (te or f_time()).value
  if not base_secs then base_secs = te.secs end
  local t = (te.secs - base_secs) * 1e9 + te.nsecs
  local payload = ""
  local wire_len = len_fi.value
  local options_len = 0
  if wire_len > 0 then
    local pl = f_payload()
    if pl then
      local ok, raw = pcall(range_raw, pl)
      if ok and raw then payload = raw else payload = tostring(pl.value):gsub("%x%x", unhex) end
    end
    -- Options matter on data segments only (the MSS less them), as do MSS and scale on SYNs.
    local hl = f_hdr_len()
    options_len = hl and max(0, hl.value - 20) or 0
  end
  local fl = flags.value % 256
  local mss, ws = 0, -1
  if fl % 4 >= 2 then
    local m, w = f_mss(), f_wscale()
    mss, ws = m and m.value or 0, w and w.value or -1
  end
  local sp, dp = srcport.value, dstport.value
  local win = f_window()
  seg.frame, seg.t = pinfo.number, t
  seg.src, seg.dst = tostring(src.value) .. ":" .. sp, tostring(dst.value) .. ":" .. dp
  seg.sport, seg.dport, seg.seq, seg.ack, seg.flags = sp, dp, seq.value, ack and ack.value or 0, fl
  seg.window = win and win.value or 0
  seg.mss, seg.wscale, seg.options_len = mss, ws, options_len
  seg.payload, seg.wire_len = payload, wire_len
  local sl, sr = 0, 0
  local sk = f_sack()
  if sk and sk.len >= 10 then
    local ok, l, r = pcall(sack_edges, sk)
    if ok then sl, sr = l, r end
  end
  seg.sack_left, seg.sack_right = sl, sr
  state:feed(seg)
end

-- A decimal string (the core keeps 64-bit LBAs exact as text) as a UInt64.
local function uint64_of(dec)
  local hi, lo = 0, 0
  for d in tostring(dec):gmatch("%d") do
    local l = lo * 10 + tonumber(d)
    lo = l % 4294967296
    hi = (hi * 10 + math.floor(l / 4294967296)) % 4294967296
  end
  return UInt64.new(lo, hi)
end

local function add_command(root, c)
  local t = root:add(pf.command):set_text(string.format(
    "Command ITT 0x%08x %s: %d round trip(s) (ideal %d), %.3f ms", c.itt, c.op or "?", c.round_trips,
    c.ideal_round_trips, c.latency_ms))
  t:add(pf.itt, c.itt)
  t:add(pf.op, c.op or "?")
  if c.session then t:add(pf.session, c.session) end
  if c.conn then t:add(pf.connection, c.conn.id) end
  t:add(pf.first_frame, c.first_frame)
  t:add(pf.command_frame, c.first_frame)
  t:add(pf.status_frame, c.status_frame)
  t:add(pf.round_trips, c.round_trips)
  t:add(pf.ideal_round_trips, c.ideal_round_trips)
  t:add(pf.excess_round_trips, c.round_trips - c.ideal_round_trips)
  t:add(pf.latency_ms, c.latency_ms)
  if c.lun then t:add(pf.lun, uint64_of(c.lun)) end
  if c.lba then t:add(pf.lba, uint64_of(c.lba)) end
  if c.bytes then t:add(pf.bytes, c.bytes) end
  if c.scsi_status then t:add(pf.scsi_status, c.scsi_status) end
  for _, k in ipairs(c.findings) do t:add(pf.command_finding, k) end
  local bt = t:add(pf.breakdown):set_text("Latency breakdown")
  for _, part in ipairs(BREAKDOWN) do bt:add(pf["bd_" .. part], c.breakdown[part] or 0) end
  -- The connection's facts are final once it is finished (second pass, or after its FIN).
  if c.conn and c.conn.finished then
    local k = c.conn:facts()
    local rtt = k.rtt_ms and string.format("%.3f ms", k.rtt_ms) or "unknown"  -- no segment measured it
    local kt = t:add(pf.conn):set_text(string.format("Connection %d: RTT %s, capture point %s%s", c.conn.id,
      rtt, k.vantage, k.mid_session_start and ", joined mid-session" or ""))
    if k.rtt_ms then kt:add(pf.conn_rtt_ms, k.rtt_ms) end
    kt:add(pf.conn_vantage, k.vantage)
    kt:add(pf.conn_joined, k.mid_session_start and true or false)
    kt:add(pf.conn_mss, mss_words(k))
    kt:add(pf.conn_window_scale, window_scale_words(k))
    kt:add(pf.conn_keys, keys_words(k))
    kt:add(pf.conn_offload, k.offload_segments)
    kt:add(pf.conn_rtt_source, rtt_source_words(k))
  end
  if #c.findings > 0 then t:append_text(" [" .. table.concat(c.findings, ", ") .. "]") end
  if c.round_trips > c.ideal_round_trips then
    t:add_proto_expert_info(ef.slow, string.format("%d round trips where %d would do",
      c.round_trips, c.ideal_round_trips))
  end
end

local function add_finding(root, f)
  local t = root:add(pf.finding_tree):set_text(string.format("Finding: %s (%s), %.3f ms lost", f.kind, f.side,
                                                             f.lost_ms or 0))
  local kind_item = t:add(pf.finding, f.kind)
  t:add(pf.side, f.side)
  t:add(pf.lost_ms, f.lost_ms or 0)
  t:add(pf.fix, f.fix)
  if f.detail then t:add(pf.detail, f.detail) end
  for _, fact in ipairs(f.inferred or {}) do t:add(pf.inferred, fact) end
  if f.session then t:add(pf.session, f.session) end
  if f.connection then t:add(pf.connection, f.connection) end
  t:add(pf.evidence_frame, f.frame)
  if f.itt then t:add(pf.finding_itt, f.itt) end
  if f.command_first_frame and f.command_first_frame ~= 0 then
    t:add(pf.command_first_frame, f.command_first_frame)
    t:add(pf.command_frame, f.command_first_frame)
  end
  if f.related then
    for _, r in ipairs(f.related) do
      if r[2] ~= 0 then
        t:add(pf.related_frame, r[2]):append_text(" (" .. r[1] .. ")")
        if pf["rel_" .. r[1]] then t:add(pf["rel_" .. r[1]], r[2]) end
      end
    end
  end
  -- One message per kind and side, so the Expert Information dialog groups them (as the C plugin).
  kind_item:add_proto_expert_info(ef[f.kind] or ef.slow, f.kind .. " (" .. f.side .. " side); fix: " .. f.fix)
end

function proto.dissector(tvb, pinfo, tree)
  if not state then proto.init() end
  local n = pinfo.number
  local findings, cmds
  -- tshark -2 without -R/-Y runs its first pass without a tree (no field values): then the
  -- second pass is the one that analyses.
  local te
  if not pinfo.visited then
    te = f_time()
    if te then state.first_pass_seen = true end
  end
  if not pinfo.visited or not state.first_pass_seen then
    -- The pass that builds the state, once, in frame order; a frame shows what it decided, and
    -- the evidence_frame/status_frame fields say where (the evidence may be earlier).
    if n > state.last_frame then feed_frame(pinfo, te) end
    findings, cmds = state.by_decision[n], state.cmd_by_decision[n]
  else
    state:finish()  -- the first pass is over: results on their evidence and status frames
    findings, cmds = state.by_evidence[n], state.by_status[n]
  end
  if not cmds and not findings then return end
  -- A protocol root node, as the C plugin's, with the commands and findings under it.
  local root = tree:add(proto)
  if cmds then for _, c in ipairs(cmds) do add_command(root, c) end end
  if findings then for _, f in ipairs(findings) do add_finding(root, f) end end
end

register_postdissector(proto)

-- End of a tshark run: finish (serialized queue, open commands) and print the report if asked.
-- Only draw is used, which every listener gets at the end: the "expert" tap, queued for the few
-- frames with expert info, costs less than "frame" (queued for every frame).
local tap = Listener.new("expert", nil)
function tap.draw()
  if not state then return end
  state:finish()
  if proto.prefs.report and not gui_enabled() then print(state:report()) end
end

if gui_enabled() then
  local function show_report()
    local w = TextWindow.new("iSCSI Doctor (Lua)")
    if not state then w:set("No capture analysed yet.") return end
    state:finish()
    w:set(state:report())
  end
  register_menu("iSCSI Doctor (Lua)/Report", show_report, MENU_TOOLS_UNSORTED)
end

return core
