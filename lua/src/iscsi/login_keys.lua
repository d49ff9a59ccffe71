---------------------------------------------------------------------------------------------
-- Login/Text key negotiation (engine/src/iscsi/login_keys.cpp)

local KEY_RULES = {
  HeaderDigest = { "digest" }, DataDigest = { "digest" },
  MaxConnections = { "min", 1, 65535 }, InitialR2T = { "or" }, ImmediateData = { "and" },
  MaxBurstLength = { "min", 512, 16777215 }, FirstBurstLength = { "min", 512, 16777215 },
  DefaultTime2Wait = { "max", 0, 3600 }, DefaultTime2Retain = { "min", 0, 3600 },
  MaxOutstandingR2T = { "min", 1, 65535 }, DataPDUInOrder = { "or" },
  DataSequenceInOrder = { "or" }, ErrorRecoveryLevel = { "min", 0, 2 },
}

local function parse_number(v)
  if v == nil or v == "" then return nil end
  local base, digits = 10, v
  if #v > 2 and v:sub(1, 1) == "0" and (v:sub(2, 2) == "x" or v:sub(2, 2) == "X") then
    base, digits = 16, v:sub(3)
    if not digits:match("^[0-9a-fA-F]+$") then return nil end
  elseif not v:match("^[0-9]+$") then
    return nil
  end
  -- Beyond 15 significant digits a value is out of every key's range (and tonumber with a base
  -- wraps around 2^64 in Lua 5.3+, where the engine rejects the value).
  digits = digits:gsub("^0+", "")
  if #digits > 15 then return nil end
  return tonumber(digits ~= "" and digits or "0", base)
end

local MAX_PENDING_TEXT = 262144

local function is_non_value(v) return v == "NotUnderstood" or v == "Irrelevant" or v == "Reject" end

local Negotiation = {}
Negotiation.__index = Negotiation

function Negotiation.new()
  return setmetatable({ pending = { [true] = "", [false] = "" },
    pending_truncated = { [true] = false, [false] = false }, exchanges = {},
    result = { header_digest = "None", data_digest = "None", initiator_mrdsl = 8192,
               target_mrdsl = 8192, first_burst = 65536, max_burst = 262144,
               max_outstanding_r2t = 1, initial_r2t = true, immediate_data = true,
               session_type = "Normal", initiator_name = "", target_name = "",
               complete = false, failed = false } }, Negotiation)
end

function Negotiation:apply(key, value, ini, in_login)
  local r = self.result
  if is_non_value(value) then
    local ex = self.exchanges[key]
    if ex and ini ~= ex.offerer_ini then
      if ini then ex.initiator = value else ex.target = value end
    end
    return
  end
  if key == "MaxRecvDataSegmentLength" then
    local n = parse_number(value)
    if n and n >= 512 and n <= 16777215 then
      if ini then r.initiator_mrdsl = n else r.target_mrdsl = n end
    end
    return
  end
  if in_login then
    if key == "InitiatorName" and ini then r.initiator_name = value return end
    if key == "TargetName" and ini then r.target_name = value return end
    if key == "SessionType" and ini then r.session_type = value return end
  end
  if not KEY_RULES[key] then return end
  local ex = self.exchanges[key]
  if not ex then ex = {}; self.exchanges[key] = ex end
  local other
  if ini then other = ex.target else other = ex.initiator end
  if ex.initiator == nil and ex.target == nil then
    ex.offerer_ini = ini
  elseif ini == ex.offerer_ini and other ~= nil then
    ex.initiator, ex.target = nil, nil
    ex.offerer_ini = ini
  end
  if ini then ex.initiator = value else ex.target = value end
end

local function in_list(list, v)
  for item in (list .. ","):gmatch("([^,]*),") do
    if item == v then return true end
  end
  return false
end

function Negotiation:recompute()
  local r = self.result
  for key, ex in pairs(self.exchanges) do
    local rule = KEY_RULES[key]
    local offer, answer
    if ex.offerer_ini then offer, answer = ex.initiator, ex.target else offer, answer = ex.target, ex.initiator end
    if not (answer and is_non_value(answer)) then
      local kind = rule[1]
      if kind == "and" or kind == "or" then
        local function pb(v) if v == "Yes" then return true elseif v == "No" then return false end return nil end
        local o, a = offer and pb(offer), answer and pb(answer)
        local is_and = kind == "and"
        local val
        if o ~= nil and a ~= nil then
          if is_and then val = o and a else val = o or a end
        elseif o ~= nil and o == (not is_and) then
          val = o
        end
        if val ~= nil then
          if key == "InitialR2T" then r.initial_r2t = val
          elseif key == "ImmediateData" then r.immediate_data = val end
        end
      elseif kind == "min" or kind == "max" then
        local function inr(v)
          local n = v and parse_number(v)
          if not n or n < rule[2] or n > rule[3] then return nil end
          return n
        end
        local o, a = inr(offer), inr(answer)
        if o and a then
          local v
          if kind == "min" then v = min(o, a) else v = max(o, a) end
          if key == "MaxBurstLength" then r.max_burst = v
          elseif key == "FirstBurstLength" then r.first_burst = v
          elseif key == "MaxOutstandingR2T" then r.max_outstanding_r2t = v end
        end
      else
        if offer and answer and (answer == "None" or answer == "CRC32C") and in_list(offer, answer) then
          if key == "HeaderDigest" then r.header_digest = answer else r.data_digest = answer end
        end
      end
    end
  end
end

function Negotiation:add_pdu(b, data, truncated)
  local op = b.opcode
  local login = op == OP.LoginRequest or op == OP.LoginResponse
  local text = op == OP.TextRequest or op == OP.TextResponse
  if not login and not text then return end
  local ini = is_initiator_opcode(op)
  -- A C-bit sequence is kept up to 256 KiB per direction; what is cut is not trusted.
  data = data or ""
  local room = MAX_PENDING_TEXT - min(MAX_PENDING_TEXT, #self.pending[ini])
  self.pending[ini] = self.pending[ini] .. data:sub(1, room)
  if truncated or #data > room then self.pending_truncated[ini] = true end
  if not hasbit(b.flags, 0x40) then
    local keys = {}
    for item in (self.pending[ini] .. "\0"):gmatch("([^%z]*)%z") do
      local k, v = item:match("^([%w%.%-%+@_]+)=(.*)$")
      if k and #k <= 63 then keys[#keys + 1] = { k, v:sub(1, 8192) } end  -- values up to 8192 bytes
    end
    if self.pending_truncated[ini] and #keys > 0 then keys[#keys] = nil end
    for _, kv in ipairs(keys) do self:apply(kv[1], kv[2], ini, login) end
    self.pending[ini] = ""
    self.pending_truncated[ini] = false
  end
  if op == OP.LoginResponse then
    local sc = floor(bhs_word(b, 36) / 16777216)
    if sc ~= 0 then self.result.failed = true end
    if sc == 0 and hasbit(b.flags, 0x80) and b.flags % 4 == 3 and not hasbit(b.flags, 0x40) then
      self.result.complete = true
    end
  end
  self:recompute()
end
