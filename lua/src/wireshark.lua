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
  -- touched_ms: time the finding held its command (overlaps others'); lost_ms its old name (#27)
  touched_ms = ProtoField.double("iscsi_doctor_lua.touched_ms", "Time touched (ms)"),
  lost_ms = ProtoField.double("iscsi_doctor_lua.lost_ms", "Time touched (ms), old name"),
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
  conn_nagle = ProtoField.string("iscsi_doctor_lua.connection.nagle", "Nagle"),
  conn_rtt_source = ProtoField.string("iscsi_doctor_lua.connection.rtt_source", "RTT from"),
  notice = ProtoField.string("iscsi_doctor_lua.notice", "Notice", "What the engine could not analyse, and why"),
}
-- Related frames by their role (the engine's names), as the C plugin's fields.
local RELATED = { released_by = "Released by", acks = "Acknowledges", released = "Released",
                  previous_small = "Previous small segment", original = "Original" }
for role, title in pairs(RELATED) do
  pf["rel_" .. role] = ProtoField.framenum("iscsi_doctor_lua." .. role, title)
end
-- Latency breakdown of a command (docs/rules.md "Latency breakdown"): the parts add up.
local BREAKDOWN = { "request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss",
                    "response", "link" }
local BREAKDOWN_TITLE = { request = "Request", think = "Target think", data = "Data", nagle = "Nagle",
                          delayed_ack = "Delayed ACK", r2t = "R2T", window = "Window", loss = "Loss",
                          response = "Response", link = "Link" }
for _, part in ipairs(BREAKDOWN) do
  pf["bd_" .. part] = ProtoField.double("iscsi_doctor_lua.breakdown." .. part .. "_ms",
                                        BREAKDOWN_TITLE[part] .. " (ms)")
end
local all_fields = {}
for _, v in pairs(pf) do all_fields[#all_fields + 1] = v end
proto.fields = all_fields

-- One expert field per finding kind, as the C plugin's: Warning for the network holds and losses,
-- Note for what is a protocol or target choice.
local NOTE_KINDS = { r2t_round_trip = true, target_think = true, serialized = true, link_limited = true,
                     think_or_hold = true, think_or_network = true }
local ef = {
  slow = ProtoExpert.new("iscsi_doctor_lua.expert.excess_round_trips",
                         "Command needed more round trips than ideal", expert.group.SEQUENCE, expert.severity.NOTE),
}
ef.notice_info = ProtoExpert.new("iscsi_doctor_lua.expert.notice_info", "iscsi-doctor notice",
                                 expert.group.PROTOCOL, expert.severity.NOTE)
local experts = { ef.slow, ef.notice_info }
for _, kind in ipairs(FINDING_KINDS) do
  ef[kind] = ProtoExpert.new("iscsi_doctor_lua.expert." .. kind, "iscsi-doctor finding: " .. kind,
                             expert.group.SEQUENCE, NOTE_KINDS[kind] and expert.severity.NOTE or expert.severity.WARN)
  experts[#experts + 1] = ef[kind]
end
proto.experts = experts

proto.prefs.ports = Pref.string("iSCSI target ports", "3260", "Comma-separated TCP ports of iSCSI targets")
proto.prefs.detect_ports = Pref.bool("Detect iSCSI on other ports", true,
  "Follow connections on other ports that start with a Login Request")
proto.prefs.info_column = Pref.bool("Add findings to the Info column", true,
  "Append [finding] and [N round trips, ideal M] to the Info column, as the C plugin does")
proto.prefs.report = Pref.bool("Print report at the end (tshark)", false,
  "Print the text report when tshark finishes (as the Tools menu window shows it)")

-- Per-packet garbage (segments, frame and payload copies) dies young: Lua 5.4's generational
-- collector frees it without re-marking the whole heap each cycle. (Since the tree items went,
-- the incremental one is as fast on small-block traffic, the cost being per object: lua/README.md
-- "Cost".)
if _VERSION >= "Lua 5.4" then pcall(collectgarbage, "generational") end

local state = nil
-- The frame reader's state: the link-layer decoder that fits this capture, the last frame read,
-- and the time of that frame in ns since the first.
local link, last_read, t_ns, abs0 = nil, 0, nil, nil

local function options_from_prefs()
  local o = {}
  for k, v in pairs(DEFAULT_OPTIONS) do o[k] = v end
  o.ports = {}
  for n in tostring(proto.prefs.ports or "3260"):gmatch("%d+") do o.ports[tonumber(n)] = true end
  o.detect_ports = proto.prefs.detect_ports
  return o
end

local listen_for_the_end  -- below

local never_answered = nil  -- frame -> notices, once the capture is read
local refiltered = false  -- the display filter applied again after the first pass

function proto.init()
  state = Analyzer.new(options_from_prefs())
  never_answered = nil
  refiltered = false
  link, last_read, t_ns, abs0 = nil, 0, nil, nil
  listen_for_the_end()
end

-- One segment table, refilled for every frame: the core keeps copies of a segment, never the
-- table itself (less garbage per packet). The decoder sets every key but frame and t.
local seg = { frame = 0, t = 0, src = "", dst = "", sport = 0, dport = 0, seq = 0, ack = 0, flags = 0,
              window = 0, mss = 0, wscale = -1, options_len = 0, pkt = "", pay = 1, pay_len = 0, wire_len = 0,
              sack_left = 0, sack_right = 0, has_ts = false, tsval = 0, tsecr = 0 }

-- A frame's time in ns since the first frame. Wireshark gives a Lua plugin times as seconds in
-- doubles: the time since the previous frame is exact to the nanosecond and is summed. It reads
-- 0 also when Wireshark cannot give the previous frame: then the absolute time (within about
-- 0.3 us) is taken instead, when the two disagree by more than 1 us.
local function frame_time(pinfo)
  if not t_ns then
    abs0, t_ns = pinfo.abs_ts, 0
    return 0
  end
  local d = pinfo.delta_ts
  if d ~= 0 then
    t_ns = t_ns + floor(d * 1e9 + 0.5)
  else
    local approx = (pinfo.abs_ts - abs0) * 1e9
    if t_ns - approx > 1000 or approx - t_ns > 1000 then t_ns = floor(approx + 0.5) end
  end
  return t_ns
end

local PT_TCP = 2  -- port_type of a frame Wireshark's TCP dissector saw
local candidates = PacketDecoder.CANDIDATES

-- A frame through one link-layer decoder; the frame's wire length is asked for only when the
-- IP datagram reaches past the captured bytes.
local function decode_with(d, tvb, pkt, n)
  if not d(pkt, n, 0, seg) then return false end
  if seg.cut then
    local extra = tvb:reported_len() - n
    if extra > 0 then return d(pkt, n, extra, seg) end
  end
  return true
end

-- Every frame once, in order: its bytes through the link-layer decoder that fits the capture,
-- into the core. Wireshark does not tell a Lua plugin the link type: the decoder is the first
-- candidate whose segment carries the ports Wireshark's TCP dissector saw, kept while it decodes.
local function feed_frame(tvb, pinfo, number)
  local t = frame_time(pinfo)
  local pkt = tvb:raw()
  local n = #pkt
  if not (link and decode_with(link, tvb, pkt, n)) then
    if pinfo.port_type ~= PT_TCP then return end
    local sp, dp = pinfo.src_port, pinfo.dst_port
    local found = nil
    for _, d in ipairs(candidates) do
      if d ~= link and decode_with(d, tvb, pkt, n) and seg.sport == sp and seg.dport == dp then
        found = d
        break
      end
    end
    if not found then return end  -- TCP in a tunnel or an ICMP error, a fragment: as the CLI
    link = found
  end
  seg.frame, seg.t = number, t
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
  local t = root:add(pf.command):set_text(string.format(  -- the C plugin's words
    "Command ITT 0x%08x %s: %d round trip%s (ideal %d), %.3f ms", c.itt, c.op or "?", c.round_trips,
    c.round_trips == 1 and "" or "s", c.ideal_round_trips, c.latency_ms))
  t:add(pf.itt, c.itt)
  t:add(pf.op, c.op or "?")
  if c.session then t:add(pf.session, c.session) end
  if c.conn then t:add(pf.connection, c.conn.id) end
  t:add(pf.first_frame, c.first_frame)
  t:add(pf.command_frame, c.first_frame):set_hidden()  -- the same fact: kept for filters only
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
    local k = c.conn:info()
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
    local nagle = nagle_words(k)
    if nagle ~= "" then kt:add(pf.conn_nagle, nagle) end
  end
  if #c.findings > 0 then t:append_text(" [" .. table.concat(c.findings, ", ") .. "]") end
  if c.round_trips > c.ideal_round_trips then
    t:add_proto_expert_info(ef.slow, string.format("%d round trips where %d would do",
      c.round_trips, c.ideal_round_trips))
  end
end

local function add_finding(root, f)
  local t = root:add(pf.finding_tree):set_text(string.format("Finding: %s (%s), %.3f ms touched", f.kind, f.side,
                                                             f.lost_ms or 0))
  local kind_item = t:add(pf.finding, f.kind)
  t:add(pf.side, f.side)
  t:add(pf.touched_ms, f.lost_ms or 0)
  t:add(pf.lost_ms, f.lost_ms or 0):set_hidden()
  t:add(pf.fix, f.fix)
  if f.detail then t:add(pf.detail, f.detail) end
  for _, fact in ipairs(f.inferred or {}) do t:add(pf.inferred, fact) end
  if f.session then t:add(pf.session, f.session) end
  if f.connection then t:add(pf.connection, f.connection) end
  t:add(pf.evidence_frame, f.frame)
  if f.itt then t:add(pf.finding_itt, f.itt) end
  if f.command_first_frame and f.command_first_frame ~= 0 then
    t:add(pf.command_first_frame, f.command_first_frame)
    t:add(pf.command_frame, f.command_first_frame):set_hidden()
  end
  if f.related then
    for _, r in ipairs(f.related) do
      if r[2] ~= 0 then
        -- Shown once, by the role's own field when it has one (Released by: 12).
        local any = t:add(pf.related_frame, r[2]):append_text(" (" .. r[1] .. ")")
        if pf["rel_" .. r[1]] then
          any:set_hidden()
          t:add(pf["rel_" .. r[1]], r[2])
        elseif r[1] == "command" and r[2] == f.command_first_frame then
          any:set_hidden()
        end
      end
    end
  end
  -- One message per kind and side, so the Expert Information dialog groups them (as the C plugin).
  kind_item:add_proto_expert_info(ef[f.kind] or ef.slow, f.kind .. " (" .. f.side .. " side); fix: " .. f.fix)
end

-- The verdict in the Info column, in the C plugin's words: " [kind]" per finding, then
-- " [N round trips, ideal M]" for a command that needed more than the ideal.
local function add_info_column(pinfo, findings, cmds)
  if not proto.prefs.info_column then return end
  local info = pinfo.cols.info
  if findings then for _, f in ipairs(findings) do info:append(" [" .. f.kind .. "]") end end
  if cmds then
    for _, c in ipairs(cmds) do
      if c.round_trips > c.ideal_round_trips then
        info:append(string.format(" [%d round trips, ideal %d]", c.round_trips, c.ideal_round_trips))
      end
    end
  end
end

-- Whether Wireshark builds a protocol tree for this frame: without one (tshark's first pass, or
-- without -V, a filter or fields) every item added is dropped. Only the TreeItem's text form
-- says so (4.0 to 4.6: "has subtree=false"; its text is nil also for a tree not shown, in 4.6);
-- where it says nothing, the items are made.
local function has_tree(tree)
  return not tostring(tree):find("has subtree=false", 1, true)
end

-- What the items would leave on a frame without a tree: the expert infos (the Expert column,
-- the expert tap), in the order add_command and add_finding give them.
local function add_experts_only(tree, cmds, findings, notices)
  if cmds then
    for _, c in ipairs(cmds) do
      if c.round_trips > c.ideal_round_trips then
        tree:add_proto_expert_info(ef.slow, string.format("%d round trips where %d would do",
          c.round_trips, c.ideal_round_trips))
      end
    end
  end
  if findings then
    for _, f in ipairs(findings) do
      tree:add_proto_expert_info(ef[f.kind] or ef.slow, f.kind .. " (" .. f.side .. " side); fix: " .. f.fix)
    end
  end
  if notices then
    for _, m in ipairs(notices) do tree:add_proto_expert_info(ef.notice_info, "iscsi-doctor: " .. m) end
  end
end

-- A display filter given when the file was opened ran during the first pass, when results were
-- on the frames that decided them: apply it once more when the first pass is over (the first
-- frame dissected again). The GUI is then still reading the file (it selects the first row before
-- it lets go), so it queues the refiltering, which keeps this plugin's state, until it is done.
local GUI = gui_enabled()  -- (a call to Wireshark per frame otherwise)
local function refilter()
  if refiltered or not GUI then return end
  refiltered = true
  local ok, current = pcall(get_filter)
  if ok and current and current ~= "" then
    pcall(set_filter, current)
    pcall(apply_filter)
  end
end

-- Commands open at the end, per connection, as the engine's notice on the first one's frame
-- (engine/src/session/connection.cpp, Connection::finish).
local function never_answered_notices()
  local open, order = {}, {}
  for _, c in ipairs(state.commands) do
    if not c.completed and c.conn then
      local o = open[c.conn]
      if not o then
        o = { n = 0 }
        open[c.conn] = o
        order[#order + 1] = c.conn
      end
      o.n = o.n + 1
      if not o.first or c.first_frame < o.first.first_frame then o.first = c end
    end
  end
  local by_frame = {}
  for _, conn in ipairs(order) do
    local o = open[conn]
    local f = o.first
    local l = by_frame[f.first_frame] or {}
    by_frame[f.first_frame] = l
    l[#l + 1] = string.format("%d %s never answered by the end of the capture (first: ITT 0x%08x, frame %d)", o.n,
                              o.n == 1 and "command" or "commands", f.itt, f.first_frame)
  end
  return by_frame
end

function proto.dissector(tvb, pinfo, tree)
  if not state then proto.init() end
  local n = pinfo.number
  local findings, cmds, notices
  if not pinfo.visited then
    -- The pass that builds the state, once, in frame order; a frame shows what it decided, and
    -- the evidence_frame/status_frame fields say where (the evidence may be earlier).
    if n > last_read then
      last_read = n
      feed_frame(tvb, pinfo, n)
    end
    findings, cmds = state.by_decision[n], state.cmd_by_decision[n]
  else
    if not never_answered then  -- the first frame after the first pass
      state:finish()  -- results on their evidence and status frames
      refilter()
      never_answered = never_answered_notices()
    end
    findings, cmds = state.by_evidence[n], state.by_status[n]
    notices = never_answered[n]
  end
  if not cmds and not findings and not notices then return end
  add_info_column(pinfo, findings, cmds)
  if not has_tree(tree) then
    add_experts_only(tree, cmds, findings, notices)
    return
  end
  -- A protocol root node, as the C plugin's, with the commands and findings under it.
  local root = tree:add(proto)
  if cmds then for _, c in ipairs(cmds) do add_command(root, c) end end
  if findings then for _, f in ipairs(findings) do add_finding(root, f) end end
  if notices then
    for _, m in ipairs(notices) do
      root:add(pf.notice, m):add_proto_expert_info(ef.notice_info, "iscsi-doctor: " .. m)
    end
  end
end

register_postdissector(proto)

-- End of a tshark run with the report asked for: finish (serialized queue, open commands) and
-- print it. Only draw is used, which every listener gets at the end. Made only then: any Lua tap
-- listener makes tshark build a protocol tree for every frame (a sixth of plain tshark's time).
local report_listener = nil
function listen_for_the_end()
  if report_listener or not proto.prefs.report or gui_enabled() then return end
  report_listener = Listener.new("expert", nil)  -- queued for few frames
  function report_listener.draw()
    if not state then return end
    state:finish()
    print(state:report())
  end
end

if gui_enabled() then
  -- Shows frames in the packet list through the display filter: the Lua API of Wireshark 4.0 to
  -- 4.6 has no "go to packet" (goto_frame) and a TextWindow no links, but set_filter and
  -- apply_filter work in all of them.
  local function show_frames(filter)
    set_filter(filter)
    apply_filter()
  end
  local function go_to_frames(text)
    local nums = {}
    for d in tostring(text or ""):gmatch("%d+") do nums[#nums + 1] = "frame.number == " .. d end
    if #nums > 0 then show_frames(table.concat(nums, " || ")) end
  end
  local function show_report()
    local w = TextWindow.new("iSCSI Doctor (Lua)")
    if not state then w:set("No capture analysed yet.") return end
    state:finish()
    w:set(state:report())
    w:add_button("Go to frames...", function()
      new_dialog("iSCSI Doctor (Lua): go to frames", go_to_frames, "Frame numbers from the report")
    end)
    w:add_button("Frames with findings", function() show_frames("iscsi_doctor_lua.finding") end)
    w:add_button("Slow commands", function()
      show_frames("iscsi_doctor_lua.round_trips > iscsi_doctor_lua.ideal_round_trips")
    end)
  end
  register_menu("iSCSI Doctor (Lua)/Report", show_report, MENU_TOOLS_UNSORTED)
end

return core
