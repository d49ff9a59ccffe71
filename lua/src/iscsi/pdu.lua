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

local function parse_bhs(s, p)
  p = p or 1
  local b = {}
  b.byte0 = s:byte(p)
  b.opcode = b.byte0 % 64
  b.immediate = hasbit(b.byte0, 0x40)
  b.flags = s:byte(p + 1)
  b.byte2 = s:byte(p + 2)
  b.byte3 = s:byte(p + 3)
  b.ahs_words = s:byte(p + 4)
  b.data_length = be24(s, p + 5)
  b.lun_hi = be32(s, p + 8)
  b.lun_lo = be32(s, p + 12)
  b.itt = be32(s, p + 16)
  b.w20 = be32(s, p + 20); b.w24 = be32(s, p + 24); b.w28 = be32(s, p + 28)
  b.w32 = be32(s, p + 32); b.w36 = be32(s, p + 36); b.w40 = be32(s, p + 40)
  b.w44 = be32(s, p + 44)
  b.cdb = s:sub(p + 32, p + 47)
  return b
end
local function header_length(b, hd) return 48 + 4 * b.ahs_words + (hd and 4 or 0) end
