---------------------------------------------------------------------------------------------
-- r2t_round_trip (engine/src/rules/r2t_round_trip.cpp, docs/rules.md "Other findings").

local R2tRoundTrip = {}
R2tRoundTrip.__index = R2tRoundTrip
function R2tRoundTrip.new() return setmetatable({}, R2tRoundTrip) end

-- A reported write that waited for R2T round trips the keys could have avoided.
function R2tRoundTrip:judge(out, c)
  if not c.write or c.r2ts == 0 or c.bytes > RULES.r2t_max_write_bytes then return end
  local f = out:finding("r2t_round_trip", "target", c.first_r2t_frame, c.breakdown.r2t, c)
  f.detail = c.r2ts .. " R2T round trip(s) for a " .. c.bytes .. "-byte write"
  add_finding_kind(c, "r2t_round_trip")
  out:emit_finding(f)
end
