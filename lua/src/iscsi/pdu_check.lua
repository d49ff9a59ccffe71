-- plausible_bhs: a port of check() in engine/src/iscsi/pdu.cpp. max_dl: the largest
-- DataSegmentLength taken as real (the receiver's MRDSL bound after login); strict: true unless
-- false, as the engine's default argument.
local MAX_DATA_SEGMENT = 0xffffff
local function plausible_bhs(b, from_initiator, max_dl, strict)
  local op = b.opcode
  if not OPNAMES[op] then return false end
  if is_initiator_opcode(op) ~= from_initiator then return false end
  if b.byte0 >= 0x80 then return false end
  if b.data_length > (max_dl or MAX_DATA_SEGMENT) then return false end
  if b.ahs_words > 64 then return false end  -- an extended CDB (248 bytes) and a read length
  if strict == false then return true end
  local f = b.flags
  if not from_initiator and b.byte0 % 128 >= 64 then return false end
  if b.ahs_words ~= 0 and op ~= OP.ScsiCommand then return false end
  local lun0 = b.lun_hi == 0 and b.lun_lo == 0
  if op == OP.NopOut then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if bhs_word(b, 32) ~= 0 or bhs_word(b, 36) ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    if b.itt == RESERVED_TAG and b.w20 == RESERVED_TAG then return false end
    return true
  elseif op == OP.ScsiCommand then
    if hasbit(f, 0x10) or hasbit(f, 0x08) then return false end
    if b.byte2 ~= 0 then return false end
    local r, w = hasbit(f, 0x40), hasbit(f, 0x20)
    if not r and not w and b.w20 ~= 0 then return false end
    if b.data_length ~= 0 and not w then return false end
    if b.data_length > b.w20 and not (r and w) then return false end
    if not hasbit(f, 0x80) and not w then return false end
    if b.ahs_words == 0 then
      local _, dir, known = decode_cdb(b.cdb)
      if known then
        if dir == "read" and w and not r then return false end
        if dir == "write" and r and not w then return false end
        if not dir and (r or w) and b.cdb:byte(1) ~= 0x7f then return false end
      end
    end
    return true
  elseif op == OP.TaskMgmtRequest then
    local fn = f % 128
    if not hasbit(f, 0x80) or fn < 1 or fn > 12 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    return true
  elseif op == OP.LoginRequest or op == OP.LoginResponse then
    if op == OP.LoginRequest and b.byte0 % 128 < 64 then return false end
    if hasbit(f, 0x80) and hasbit(f, 0x40) then return false end
    if hasbit(f, 0x20) or hasbit(f, 0x10) then return false end
    local csg, nsg, t = floor(f / 4) % 4, f % 4, hasbit(f, 0x80)
    if csg == 2 or (t and (nsg == 2 or nsg <= csg)) then return false end
    -- An all-zero ISID is no real initiator's; ISID type 3 is reserved.
    if (b.lun_hi == 0 and floor(b.lun_lo / 65536) == 0) or b.lun_hi >= 0xc0000000 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    if op == OP.LoginRequest then
      if b.w20 % 65536 ~= 0 then return false end
      if bhs_word(b, 32) ~= 0 or bhs_word(b, 36) ~= 0 then return false end
    else
      if b.w20 ~= 0 then return false end
      if floor(bhs_word(b, 36) / 16777216) > 3 or bhs_word(b, 36) % 65536 ~= 0 then return false end
    end
    return true
  elseif op == OP.TextRequest or op == OP.TextResponse then
    -- F and C together are an error; neither is what zero-filled data looks like.
    if f % 64 ~= 0 or (hasbit(f, 0x80) == hasbit(f, 0x40)) then return false end
    if b.itt == RESERVED_TAG then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if bhs_word(b, 36) ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    if op == OP.TextRequest and bhs_word(b, 32) ~= 0 then return false end
    return true
  elseif op == OP.DataOut then
    if f % 128 ~= 0 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w24 ~= 0 or bhs_word(b, 32) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    if b.data_length == 0 or b.itt == RESERVED_TAG then return false end
    if bhs_word(b, 40) + b.data_length > 0xffffffff then return false end
    return true
  elseif op == OP.LogoutRequest then
    if not hasbit(f, 0x80) or f % 128 > 2 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if b.w20 % 65536 ~= 0 or bhs_word(b, 32) ~= 0 or bhs_word(b, 36) ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    return true
  elseif op == OP.SnackRequest then
    if floor(f / 16) ~= 8 or f % 16 > 3 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if b.w24 ~= 0 or bhs_word(b, 32) ~= 0 or bhs_word(b, 36) ~= 0 then return false end
    return true
  elseif op == OP.NopIn then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if bhs_word(b, 36) ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    return true
  elseif op == OP.ScsiResponse then
    if not hasbit(f, 0x80) or hasbit(f, 0x40) or hasbit(f, 0x20) or hasbit(f, 0x01) then return false end
    if (hasbit(f, 0x04) and hasbit(f, 0x02)) or (hasbit(f, 0x10) and hasbit(f, 0x08)) then return false end
    if b.byte2 > 1 and b.byte2 < 0x80 then return false end
    if b.byte2 == 0 and not STATUS_KNOWN[b.byte3] then return false end
    if b.ahs_words ~= 0 or not lun0 then return false end
    return true
  elseif op == OP.TaskMgmtResponse then
    if f ~= 0x80 or (b.byte2 > 6 and b.byte2 ~= 255) or b.byte3 ~= 0 then return false end
    if b.data_length ~= 0 or not lun0 or b.w20 ~= 0 or bhs_word(b, 36) ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    return true
  elseif op == OP.DataIn then
    if hasbit(f, 0x20) or hasbit(f, 0x10) or hasbit(f, 0x08) then return false end
    if b.byte2 ~= 0 then return false end
    if hasbit(f, 0x01) then
      if not hasbit(f, 0x80) or not STATUS_KNOWN[b.byte3] then return false end
      if hasbit(f, 0x04) and hasbit(f, 0x02) then return false end
    elseif b.byte3 ~= 0 or hasbit(f, 0x04) or hasbit(f, 0x02) then
      return false
    elseif b.data_length == 0 then
      return false
    end
    if b.itt == RESERVED_TAG then return false end
    if bhs_word(b, 40) + b.data_length > 0xffffffff then return false end
    return true
  elseif op == OP.LogoutResponse then
    if f ~= 0x80 or b.byte2 > 3 or b.byte3 ~= 0 then return false end
    if b.data_length ~= 0 or not lun0 or b.w20 ~= 0 or bhs_word(b, 36) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    return true
  elseif op == OP.R2T then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if bhs_word(b, 44) == 0 or b.w20 == RESERVED_TAG then return false end
    if bhs_word(b, 40) + bhs_word(b, 44) > 0xffffffff then return false end
    return true
  elseif op == OP.AsyncMessage then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.itt ~= RESERVED_TAG or b.w20 ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    local ev = floor(bhs_word(b, 36) / 16777216)
    if ev > 4 and ev ~= 255 then return false end
    return true
  elseif op == OP.Reject then
    if f ~= 0x80 or b.byte3 ~= 0 then return false end
    if b.byte2 < 1 or b.byte2 > 0x0c then return false end
    if not lun0 or b.itt ~= RESERVED_TAG or b.w20 ~= 0 or bhs_word(b, 40) ~= 0 or bhs_word(b, 44) ~= 0 then return false end
    if b.data_length < 48 then return false end
    return true
  end
  return false
end

local function kept_data_limit(b)
  local op = b.opcode
  if op == OP.LoginRequest or op == OP.LoginResponse or op == OP.TextRequest or op == OP.TextResponse then
    return 65536
  elseif op == OP.ScsiResponse or op == OP.AsyncMessage or op == OP.Reject then
    return 256
  elseif op == OP.DataIn then
    return hasbit(b.flags, 0x01) and 256 or 0
  end
  return 0
end
