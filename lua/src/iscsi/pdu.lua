---------------------------------------------------------------------------------------------
-- iSCSI BHS (engine/src/iscsi/pdu.cpp)

local OPNAMES = {
  [0x00] = "NOP-Out", [0x01] = "SCSI Command", [0x02] = "Task Management Request",
  [0x03] = "Login Request", [0x04] = "Text Request", [0x05] = "Data-Out",
  [0x06] = "Logout Request", [0x10] = "SNACK Request", [0x20] = "NOP-In",
  [0x21] = "SCSI Response", [0x22] = "Task Management Response", [0x23] = "Login Response",
  [0x24] = "Text Response", [0x25] = "Data-In", [0x26] = "Logout Response", [0x31] = "R2T",
  [0x32] = "Async Message", [0x3f] = "Reject",
}
local OP = {
  NopOut = 0x00, ScsiCommand = 0x01, TaskMgmtRequest = 0x02, LoginRequest = 0x03,
  TextRequest = 0x04, DataOut = 0x05, LogoutRequest = 0x06, SnackRequest = 0x10, NopIn = 0x20,
  ScsiResponse = 0x21, TaskMgmtResponse = 0x22, LoginResponse = 0x23, TextResponse = 0x24,
  DataIn = 0x25, LogoutResponse = 0x26, R2T = 0x31, AsyncMessage = 0x32, Reject = 0x3f,
}
local function is_initiator_opcode(op) return op < 0x20 end
local function pdu_carries_digests(op) return op ~= OP.LoginRequest and op ~= OP.LoginResponse end

-- The 32 bytes read on every PDU in one call and the table in one constructor (a header per
-- PDU, and per byte tried while searching for one), of 16 fields at most: Lua sizes its hash at
-- a power of two. The words at 32..47, read only by the checks and the login, are read from the
-- source string s at p when asked (bhs_word); the CDB is cut out only for a SCSI Command.
-- into: a header table to refill instead (the framer's, once its PDU was read).
local function parse_bhs(s, p, into)
  p = p or 1
  local b0, fl, b2, b3, ahs, l1, l2, l3, u1, u2, u3, u4, u5, u6, u7, u8, i1, i2, i3, i4,
        a1, a2, a3, a4, c1, c2, c3, c4 = s:byte(p, p + 27)
  local op, dl = b0 % 64, (l1 * 256 + l2) * 256 + l3
  local lun_hi, lun_lo = ((u1 * 256 + u2) * 256 + u3) * 256 + u4, ((u5 * 256 + u6) * 256 + u7) * 256 + u8
  local itt = ((i1 * 256 + i2) * 256 + i3) * 256 + i4
  local w20, w24 = ((a1 * 256 + a2) * 256 + a3) * 256 + a4, ((c1 * 256 + c2) * 256 + c3) * 256 + c4
  local cdb = op == 0x01 and s:sub(p + 32, p + 47) or nil  -- only a SCSI Command's is read
  if not into then
    return { byte0 = b0, opcode = op, flags = fl, byte2 = b2, byte3 = b3, ahs_words = ahs, data_length = dl,
             lun_hi = lun_hi, lun_lo = lun_lo, itt = itt, w20 = w20, w24 = w24, s = s, p = p, cdb = cdb }
  end
  into.byte0, into.opcode, into.flags, into.byte2, into.byte3, into.ahs_words = b0, op, fl, b2, b3, ahs
  into.data_length, into.lun_hi, into.lun_lo, into.itt, into.w20, into.w24 = dl, lun_hi, lun_lo, itt, w20, w24
  into.s, into.p, into.cdb = s, p, cdb
  return into
end
-- The header's 32-bit word at byte offset off (32, 36, 40 or 44).
local function bhs_word(b, off) return be32(b.s, b.p + off) end
local function header_length(b, hd) return 48 + 4 * b.ahs_words + (hd and 4 or 0) end
