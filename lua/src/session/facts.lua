---------------------------------------------------------------------------------------------
-- A connection's facts (engine/src/session/connection.cpp Connection::info) and their words
-- (engine/src/util/connection_words.cpp): what the capture showed, and what was inferred.

function Connection:info()
  local ri, rt = self.tcp:rtt(I2T), self.tcp:rtt(T2I)
  local f = { rtt_initiator_ms = ri:known() and ri:ns() / 1e6 or nil, rtt_target_ms = rt:known() and rt:ns() / 1e6 or nil,
              vantage = "unknown", rtt_source_initiator = ri:source(), rtt_source_target = rt:source() }
  if ri:known() and rt:known() then
    local full = ri:ns() + rt:ns()
    f.rtt_ms = full / 1e6
    local share = full > 0 and ri:ns() / full or 0.5
    -- a round trip known only as an upper bound may be any shorter (the engine's vantage_now)
    local tiny = floor(RULES.vantage_min_rtt_ms * 1e6 + 0.5)
    local bi, bt = not ri:upper_bound_only(), not rt:upper_bound_only()
    if full < tiny then f.vantage = "unknown"
    elseif share < RULES.vantage_initiator_share then f.vantage = (bt or ri:ns() < tiny) and "initiator" or "unknown"
    elseif share > RULES.vantage_target_share then f.vantage = (bi or rt:ns() < tiny) and "target" or "unknown"
    else
      -- between them only if neither side's bound may hold its own time (then it may be the near one)
      local late = floor(self.view.options.delayed_ack_min_ms * 1e6 + 0.5)
      local near_i = ri:ns() >= tiny and ri:may_hold_side_time(late)
      local near_t = rt:ns() >= tiny and rt:may_hold_side_time(late)
      f.vantage = (near_i or near_t) and "unknown" or "midpath"
    end
  end
  local fi, ft = self.tcp:flow(I2T), self.tcp:flow(T2I)
  f.mss_initiator = min(fi:effective_mss(), 65535)
  f.mss_target = min(ft:effective_mss(), 65535)
  f.mss_inferred = not (fi.mss_from_syn and ft.mss_from_syn)
  f.mss_source_initiator, f.mss_source_target = fi:mss_source(), ft:mss_source()
  f.wscale_initiator = ft:peer_wscale(fi.wscale_offered, ft.wscale_offered)
  f.wscale_target = fi:peer_wscale(ft.wscale_offered, fi.wscale_offered)
  f.wscale_inferred = not (fi.peer_wscale_known and ft.peer_wscale_known)
  f.offload_segments = fi.aggregates + ft.aggregates
  f.nagle_off_frame_initiator, f.nagle_off_frame_target = fi.nagle_off_frame, ft.nagle_off_frame
  local k = self.keys
  local function yn(v) return v and "Yes" or "No" end
  local function num(v) return string.format("%.0f", v) end
  f.keys = { { "ImmediateData", yn(k.immediate_data) }, { "InitialR2T", yn(k.initial_r2t) },
             { "FirstBurstLength", num(k.first_burst) }, { "MaxBurstLength", num(k.max_burst) },
             { "MaxRecvDataSegmentLength(target)", num(k.target_mrdsl) },
             { "MaxRecvDataSegmentLength(initiator)", num(k.initiator_mrdsl) },
             { "MaxOutstandingR2T", num(k.max_outstanding_r2t) },
             { "HeaderDigest", self.header_digest and "CRC32C" or "None" },
             { "DataDigest", self.data_digest and "CRC32C" or "None" },
             { "source", k.from_login and "login" or (k.login_cut and "login cut short" or
                         (k.initial_r2t_inferred and "inferred" or "default")) } }
  f.mid_session_start = self.mid_session
  f.id, f.session = self.id, self:session_id()
  f.saw_handshake, f.saw_login = self.tcp:saw_syn(), self.saw_login
  f.header_digest = self.header_digest or self.pdus[I2T]:header_digest_on()
  f.data_digest = self.data_digest or self.pdus[I2T]:data_digest_on()
  f.frames, f.commands, f.digest_errors = self.frames, self.commands, self.digest_errors
  f.pdus = self.pdus[I2T]:pdus() + self.pdus[T2I]:pdus()
  f.resyncs = self.pdus[I2T]:resyncs() + self.pdus[T2I]:resyncs()
  f.bytes_missing = fi.bytes_missing + ft.bytes_missing
  f.max_outstanding = self.max_outstanding
  f.never_answered = self.commands - min(self.completed, self.commands)
  return f
end

local function mss_words(f)
  local s = string.format("MSS initiator %d, target %d", f.mss_initiator, f.mss_target)
  if f.mss_inferred then
    if f.mss_source_initiator == f.mss_source_target then
      s = s .. " (inferred: " .. f.mss_source_initiator .. ")"
    else
      s = s .. " (inferred: initiator " .. f.mss_source_initiator .. ", target " .. f.mss_source_target .. ")"
    end
  end
  return s
end

local function window_scale_words(f)
  if f.wscale_inferred then
    return string.format("not in the capture: at least %d (initiator), %d (target), from the data in flight",
                         f.wscale_initiator, f.wscale_target)
  end
  return string.format("initiator %d, target %d (handshake)", f.wscale_initiator, f.wscale_target)
end

local function rtt_source_words(f)
  local function side(src)
    if src == "" then return "not measured" end
    if src == "ACKs on data" then return "ACKs on data only (an upper bound: may hold its answer time)" end
    if src == "pure ACKs that may be delayed" then
      return "pure ACKs of one segment or less only (an upper bound: each may have waited for a delayed-ACK timer)"
    end
    if src == "Nagle releases" then
      return "Nagle releases (short segments that left a fixed time after the ACK of the one before, however " ..
             "late it came: a round trip if Nagle is on)"
    end
    return src
  end
  return "initiator " .. side(f.rtt_source_initiator) .. ", target " .. side(f.rtt_source_target)
end

local function nagle_words(f)
  local i, t = f.nagle_off_frame_initiator, f.nagle_off_frame_target
  if i == 0 and t == 0 then return "" end
  local s = "Nagle off on the "
  if i ~= 0 then s = s .. string.format("initiator (frame %d)", i) end
  if i ~= 0 and t ~= 0 then s = s .. " and the " end
  if t ~= 0 then s = s .. string.format("target (frame %d)", t) end
  return s .. ": a short segment sent while the previous one was unacknowledged"
end

local function keys_words(f)
  if #f.keys == 0 then return "no negotiated keys seen (login not captured)" end
  local parts = {}
  for _, kv in ipairs(f.keys) do parts[#parts + 1] = kv[1] .. "=" .. kv[2] end
  return table.concat(parts, "  ")
end
