---------------------------------------------------------------------------------------------
-- Text report (the Tools menu window, and tshark with -o iscsi_doctor_lua.report:TRUE)

local function fmt_ms(v) return string.format("%.3f", v or 0) end

function Analyzer:report()
  local out = {}
  local function p(s) out[#out + 1] = s end
  p("iscsi-doctor (Lua plugin " .. VERSION .. ")")
  local completed = 0
  for _, c in ipairs(self.commands) do if c.completed then completed = completed + 1 end end
  p(string.format("%d commands (%d completed), %d findings, %d connections",
    #self.commands, completed, #self.findings, #self.connections))
  -- Each kind's own time per session, in one pass over the commands.
  local own_by_session = {}
  for _, c in ipairs(self.commands) do
    if c.completed then
      local own = own_by_session[c.session] or {}
      own_by_session[c.session] = own
      for _, kind in ipairs(c.findings or {}) do
        local part = OWN_PART[kind]
        if part then own[kind] = (own[kind] or 0) + (c.breakdown[part] or 0) end
      end
    end
  end
  for _, s in ipairs(self.sessions) do
    p("")
    local name = (s.initiator_name and s.initiator_name ~= "") and
      (s.initiator_name .. " -> " .. (s.target_name or "")) or (s.initiator .. " -> " .. s.target)
    p(string.format("Session %d: %s (connections %s)", s.id, name, table.concat(s.connections, ",")))
    local kinds, order = {}, {}
    for _, f in ipairs(self.findings) do
      if f.session == s.id then
        local key = f.kind .. "|" .. f.side
        local k = kinds[key]
        if not k then
          k = { kind = f.kind, side = f.side, n = 0, lost = 0, frames = {} }
          kinds[key] = k
          order[#order + 1] = k
        end
        k.n = k.n + 1
        k.lost = k.lost + (f.lost_ms or 0)
        k.frames[#k.frames + 1] = f.frame
      end
    end
    local own = own_by_session[s.id] or {}
    for _, k in ipairs(order) do k.own = own[k.kind] or 0 end
    table.sort(order, function(a, b)
      if a.own ~= b.own then return a.own > b.own end
      return a.lost > b.lost
    end)
    if #order == 0 then p("  no findings") end
    for _, k in ipairs(order) do
      local ex = {}
      for i = 1, min(5, #k.frames) do ex[i] = tostring(k.frames[i]) end
      p(string.format("  %s (%s): %d occurrence(s), %s ms lost (its own), %s ms touched; frames %s",
        k.kind, k.side, k.n, fmt_ms(k.own), fmt_ms(k.lost), table.concat(ex, ", ")))
      p("    fix: " .. fix_for(k.kind, k.side))
    end
  end
  p("")
  p("Findings (frame kind side lost_ms itt):")
  for _, f in ipairs(self.findings) do
    p(string.format("finding %d %s %s %s %s", f.frame, f.kind, f.side, fmt_ms(f.lost_ms),
      f.itt and string.format("0x%08x", f.itt) or "-"))
  end
  p("Commands (status_frame itt round_trips ideal latency_ms):")
  for _, c in ipairs(self.commands) do
    if c.completed then
      p(string.format("command %d 0x%08x %d %d %s", c.status_frame, c.itt, c.round_trips,
        c.ideal_round_trips, fmt_ms(c.latency_ms)))
    end
  end
  return table.concat(out, "\n")
end

local core = { Analyzer = Analyzer, FINDING_KINDS = FINDING_KINDS, RULES = RULES,
               UNSUPPORTED_KINDS = UNSUPPORTED_KINDS, fix_for = fix_for, VERSION = VERSION,
               PacketDecoder = PacketDecoder, SCSI_STATUS = SCSI_STATUS, SCSI_SENSE_KEY = SCSI_SENSE_KEY }
