---------------------------------------------------------------------------------------------
-- r2t_round_trip (engine/src/rules/r2t_round_trip.cpp, docs/rules.md "Other findings").

-- A write that waited for R2T round trips the keys could have avoided.
function Connection:judge_r2t_round_trip(c)
  if not c.write or c.r2ts == 0 or c.bytes > RULES.r2t_max_write_bytes then return end
  self:add_finding_kind(c, "r2t_round_trip")
  self:emit_finding({ kind = "r2t_round_trip", side = "target", frame = c.first_r2t_frame,
    lost_ms = c.breakdown.r2t, itt = c.itt, command_first_frame = c.first_frame,
    detail = c.r2ts .. " R2T round trip(s) for a " .. c.bytes .. "-byte write" })
end
