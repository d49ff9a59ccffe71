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
local function parse_bhs(s, p)
  p = p or 1
  local b0, fl, b2, b3, ahs, l1, l2, l3, u1, u2, u3, u4, u5, u6, u7, u8, i1, i2, i3, i4,
        a1, a2, a3, a4, c1, c2, c3, c4 = s:byte(p, p + 27)
  return { byte0 = b0, opcode = b0 % 64, flags = fl, byte2 = b2, byte3 = b3,
    ahs_words = ahs, data_length = (l1 * 256 + l2) * 256 + l3,
    lun_hi = ((u1 * 256 + u2) * 256 + u3) * 256 + u4, lun_lo = ((u5 * 256 + u6) * 256 + u7) * 256 + u8,
    itt = ((i1 * 256 + i2) * 256 + i3) * 256 + i4,
    w20 = ((a1 * 256 + a2) * 256 + a3) * 256 + a4, w24 = ((c1 * 256 + c2) * 256 + c3) * 256 + c4,
    s = s, p = p,
    cdb = b0 % 64 == 0x01 and s:sub(p + 32, p + 47) or nil }  -- only a SCSI Command's is read
end
-- The header's 32-bit word at byte offset off (32, 36, 40 or 44).
local function bhs_word(b, off) return be32(b.s, b.p + off) end
local function header_length(b, hd) return 48 + 4 * b.ahs_words + (hd and 4 or 0) end
