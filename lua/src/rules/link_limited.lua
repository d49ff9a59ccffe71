---------------------------------------------------------------------------------------------
-- link_limited (engine/src/rules/link_limited.cpp, docs/rules.md "The link"): a command whose
-- data kept the path busy for most of its time beyond the round trips it needs; the holds the
-- link explains are not given.

local function mbit_words(bytes_per_s)
  local mbit = bytes_per_s * 8 / 1e6
  return string.format(mbit >= 100 and "%.0f" or mbit >= 10 and "%.1f" or "%.2f", mbit)
end

-- The hold kinds: each one's own time is its breakdown part (OWN_PART).
local HELD_KINDS = { "nagle_hold", "delayed_ack", "cwnd_limited", "rwnd_limited" }

local LinkLimited = {}
LinkLimited.__index = LinkLimited
function LinkLimited.new() return setmetatable({}, LinkLimited) end

-- A reported command whose data kept the path busy: the link's share of its breakdown.
function LinkLimited:judge(v, out, c)
  if c.bytes < RULES.link_command_bytes_min then return end  -- too little data to keep a link busy
  local flow = v:flow(c.write and I2T or T2I)
  local m = flow:link_meter()  -- the link, whoever's data kept it busy
  local busy_ns = m.busy_ns - c.link_busy0
  local busy, rtt = ms(busy_ns), ms(v:full_rtt_ns())
  if busy_ns <= 0 or rtt <= 0 then return end
  -- The link's time must be a large share of what the command needs at best (its round trips)
  -- and of what it took beyond them: else the round trips or a window were the limit.
  local k_rtt = c.ideal_round_trips * rtt
  if busy < RULES.link_share * k_rtt or busy < RULES.link_share * (c.latency_ms - k_rtt) then return end
  local bd = c.breakdown
  local left = busy
  local function take(part, at_most)
    local x = min(min(bd[part], left), at_most or math.huge)
    bd[part] = bd[part] - x
    left = left - x
    bd.link = bd.link + x
    return x
  end
  take("data")
  local w = take("window")
  local wc = min(bd.cwnd, w)
  bd.cwnd = bd.cwnd - wc
  bd.rwnd = bd.rwnd - min(bd.rwnd, w - wc)
  take("delayed_ack")
  take("nagle")
  take("response")
  if not c.write and not v:near(T2I) and c.link_busy_reply >= 0 then
    -- A read's first reply that came while the link was busy with other data was queued behind it.
    take("think", ms(c.link_busy_reply - c.link_busy0))
  end
  if c.write then
    -- A write's data reached the target only at the link's pace.
    take("think")
    take("request")
  end
  if bd.link <= 0 then return end
  -- Holds the link explains added no round trip of their own: the data was clocked out by it.
  local wait_min = ms(v:wait_min_ns())
  local holds_left = false
  for _, k in ipairs(HELD_KINDS) do
    if bd[OWN_PART[k]] >= wait_min then
      holds_left = true
    elseif c.findings_set[k] then
      c.findings_set[k] = nil
      for i = #c.findings, 1, -1 do
        if c.findings[i] == k then table.remove(c.findings, i) end
      end
    end
  end
  if not holds_left then c.round_trips = max(1, floor((c.h_target - c.held_h + 1) / 2)) end
  local bytes = flow.link.busy_bytes - c.link_bytes0
  local rate = bytes * 1e9 / busy_ns
  local detail = "the data moved at " .. mbit_words(rate) .. " Mbit/s, the link busy for " .. whole_ms(busy) ..
                 " ms: the transfer is bound by the link's rate"
  if m.rate > 0 and rate < RULES.link_shared_rate_share * m.rate then
    detail = detail .. " (the link has carried " .. mbit_words(m.rate) .. " Mbit/s: it is shared)"
  end
  local f = out:finding("link_limited", "network", c.status_frame, bd.link, c)
  f.related = { { "command", c.first_frame } }
  f.detail = detail
  add_finding_kind(c, "link_limited")
  out:emit_finding(f)
end

-- The holds a command's segments waited on, given when the command is reported: those whose
-- time the link explains are dropped, the others keep what is left of it.
function LinkLimited:give_held_findings(v, out, c)
  local held = c.held_findings
  if not held or #held == 0 then return end
  local bd = c.breakdown
  local linked = bd.link > 0
  local wait_min = ms(v:wait_min_ns())
  for _, f in ipairs(held) do
    local left = bd[OWN_PART[f.kind]]  -- every held finding is a hold kind's
    if not linked or left >= wait_min then
      if linked then f.lost_ms = min(f.lost_ms, left) end
      out:emit_finding(f)
    end
  end
  c.held_findings = {}
end
