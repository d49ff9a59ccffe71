---------------------------------------------------------------------------------------------
-- Operational keys (engine/src/session/keys.hpp)

local function default_keys()
  return { immediate_data = true, initial_r2t = true, first_burst = 65536, max_burst = 262144,
           target_mrdsl = 8192, initiator_mrdsl = 8192, max_outstanding_r2t = 1,
           from_login = false, initial_r2t_inferred = false }
end

local function ideal_round_trips(k, write, bytes)
  if not write or bytes == 0 then return 1 end
  local unsolicited = 0
  if k.immediate_data then unsolicited = min(bytes, min(k.first_burst, k.target_mrdsl)) end
  if not k.initial_r2t then unsolicited = min(bytes, k.first_burst) end
  local rest = bytes - unsolicited
  if rest == 0 then return 1 end
  local burst = k.max_burst ~= 0 and k.max_burst or 262144
  local cycles = math.ceil(rest / burst)
  local parallel = k.max_outstanding_r2t ~= 0 and k.max_outstanding_r2t or 1
  return 1 + math.ceil(cycles / parallel)
end
