-- SPDX-License-Identifier: GPL-2.0-or-later
--
-- iscsi-doctor for Wireshark, in Lua: a post-dissector that explains, per SCSI command, why it
-- was slow (Nagle holds, delayed ACKs, R2T round trips, window holds, retransmissions, target
-- think time, a serialized queue), with the same rules as the C++ engine (docs/rules.md).
--
-- Install: copy this file to ~/.local/lib/wireshark/plugins/ (or run Wireshark/tshark with
-- -X lua_script:lua/iscsi_doctor.lua). See lua/README.md.
--
-- Structure: an analysis core that knows nothing about Wireshark (segments in, commands and
-- findings out: a port of engine/src/session/connection.cpp, engine/src/tcp/flow.*,
-- engine/src/iscsi/framer.cpp and login_keys.cpp), then the Wireshark glue at the end.
-- Lua 5.1-5.4: no integer division, no goto, no bit operators (bit32/bit only, for CRC32C).

local VERSION = "0.1.0"

---------------------------------------------------------------------------------------------
-- Rules this plugin implements (docs/rules.md); tests/lua checks this list against the doc.

local FINDING_KINDS = {
  "nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
  "retransmission", "target_think", "serialized",
}
-- Finding kinds of docs/rules.md this plugin does not implement (none; see lua/README.md).
local UNSUPPORTED_KINDS = {}

-- Same texts as fix_for() in engine/src/advice/summary.cpp.
local function fix_for(kind, side)
  if kind == "nagle_hold" then
    if side == "target" then
      return "set TCP_NODELAY on the target's socket, or send the final Data-In and the SCSI " ..
             "Response in one write (or put the status in the final Data-In, S bit)"
    end
    return "set TCP_NODELAY on the initiator's socket, or send the command header and its " ..
           "immediate data in one write (writev/MSG_MORE)"
  elseif kind == "delayed_ack" then
    if side == "initiator" then
      return "quick-ACK on the initiator (TCP_QUICKACK after each receive, or a lower " ..
             "delayed-ACK timeout); removing the Nagle hold on the target removes the wait"
    end
    return "quick-ACK on the target (TCP_QUICKACK after each receive); removing the Nagle " ..
           "hold on the initiator removes the wait"
  elseif kind == "r2t_round_trip" then
    return "negotiate ImmediateData=Yes and InitialR2T=No, with FirstBurstLength at least the " ..
           "write size, so write data travels with the command"
  elseif kind == "cwnd_limited" then
    return "keep the congestion window open between bursts: net.ipv4.tcp_slow_start_after_idle=0 " ..
           "on the sender, and a larger initial window (ip route ... initcwnd)"
  elseif kind == "rwnd_limited" then
    if side == "target" then
      return "raise the initiator's receive buffer (net.ipv4.tcp_rmem, window scaling)"
    end
    return "raise the target's receive buffer (net.ipv4.tcp_rmem, window scaling)"
  elseif kind == "retransmission" then
    return "find the loss on the path (interface errors, drops, duplex, MTU); losses cost a " ..
           "timeout or a round trip each"
  elseif kind == "target_think" then
    return "the target itself is slow (backing store, CPU, locking): look at the target's disks " ..
           "and its own latency, not the network"
  elseif kind == "serialized" then
    return "keep more commands outstanding (queue depth > 1: more I/O threads, async I/O, a " ..
           "larger nr_requests/queue depth) or larger transfers, so round trips overlap"
  end
  return ""
end

-- The rule constants, as docs/rules.md "Rule constants" lists them; tests/lua checks this table
-- against that one, and doc_sha256 against the whole document, so that a change of the rules
-- fails the Lua tests until this file follows (then set doc_sha256 to the new digest).
local RULES = {
  doc_sha256 = "635ac7b1656aa59565393b767e7058b8b56a347b8c39d1ef8fe79b16b737062c",
  delayed_ack_min_ms = 10,
  think_min_ms = 2,
  think_share = 0.5,
  release_tolerance_ms = 0.3,
  release_tolerance_rtt_divisor = 10,
  wait_min_ms = 0.5,
  wait_min_rtt_divisor = 4,
  serialized_min_commands = 8,
  serialized_wait_share = 0.25,
  r2t_max_write_bytes = 16777215,
  mss_fallback_min = 536,
  ack_record_keep_rtts = 2,
  ack_record_keep_ms = 10,
  rwnd_edge_window_divisor = 4,
  near_initiator_rtt_factor = 5,
  settle_max_ms = 1000,
  closed_linger_ms = 1000,
  closed_linger_rtts = 4,
  vantage_initiator_share = 0.2,  -- the vantage is reported by the CLI; kept for the table's sake
  vantage_target_share = 0.8,
  vantage_min_rtt_ms = 0.2,
}

-- Options (engine/include/iscsi_doctor/analyzer.hpp)
local DEFAULT_OPTIONS = {
  ports = { [3260] = true },
  detect_ports = true,
  delayed_ack_min_ms = RULES.delayed_ack_min_ms,
  think_min_ms = RULES.think_min_ms,
  max_connections = 65536,
  idle_timeout_s = 60,
  max_open_commands = 65536,
  max_out_of_order_bytes = 4 * 1048576,
}

---------------------------------------------------------------------------------------------
-- Small helpers

local floor = math.floor
local function min(a, b) if a < b then return a end return b end
local function max(a, b) if a > b then return a end return b end
local function ms(ns) return ns / 1e6 end
local function trunc(x) if x >= 0 then return floor(x) end return -floor(-x) end
-- Rounded milliseconds for messages, as the engine's whole_ms (int64(v + 0.5): toward zero).
local function whole_ms(v) return string.format("%.0f", trunc(v + 0.5)) end
local TWO32 = 4294967296
local RESERVED_TAG = 0xffffffff

local function hasbit(v, b) return (v % (b + b)) >= b end  -- b a power of two

local function be16(s, p) local a, b = s:byte(p, p + 1); return a * 256 + b end
local function be24(s, p) local a, b, c = s:byte(p, p + 2); return (a * 256 + b) * 256 + c end
local function be32(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function pad4(n) return n + (4 - n % 4) % 4 end

-- XOR for CRC32C: bit32 (5.2), bit (BitOp, in Wireshark's Lua 5.1), the native operator (5.3+,
-- compiled at run time so that this file still parses under 5.1/5.2), else arithmetic a byte at
-- a time (plain Lua 5.1). Operands and results are unsigned 32-bit.
local bxor
do
  local b32 = rawget(_G, "bit32")
  local bop = rawget(_G, "bit")
  local ld = rawget(_G, "loadstring") or load
  if b32 then
    bxor = b32.bxor
  elseif bop then
    bxor = function(a, b) return bop.bxor(a, b) % TWO32 end
  elseif ld and ld("return 1 ~ 1") then
    bxor = ld("return function(a, b) return a ~ b end")()
  else
    local X  -- X[a * 256 + b] = a xor b, for bytes
    bxor = function(a, b)
      if not X then
        X = {}
        for x = 0, 255 do
          for y = 0, 255 do
            local r, p, u, v = 0, 1, x, y
            while u > 0 or v > 0 do
              if u % 2 ~= v % 2 then r = r + p end
              u, v, p = floor(u / 2), floor(v / 2), p * 2
            end
            X[x * 256 + y] = r
          end
        end
      end
      local r, p = 0, 1
      for _ = 1, 4 do
        local x, y = a % 256, b % 256
        r = r + X[x * 256 + y] * p
        a, b, p = (a - x) / 256, (b - y) / 256, p * 256
      end
      return r
    end
  end
end

local CRC_TABLE
local function crc32c_update(crc, s, i, j)
  if not CRC_TABLE then
    CRC_TABLE = {}
    for n = 0, 255 do
      local c = n
      for _ = 1, 8 do
        if c % 2 == 1 then c = bxor(floor(c / 2), 0x82F63B78) else c = floor(c / 2) end
      end
      CRC_TABLE[n] = c
    end
  end
  local T = CRC_TABLE
  for k = i, j do
    crc = bxor(T[bxor(crc, s:byte(k)) % 256], floor(crc / 256))
  end
  return crc
end
local function crc32c_init() return 0xffffffff end
local function crc32c_final(c) return bxor(c, 0xffffffff) end
-- The digest travels little-endian on the wire (RFC 7143 §13.1 / crc32c.hpp).
local function digest_from_wire(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((d * 256 + c) * 256 + b) * 256 + a
end

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
local function carries_digests(op) return op ~= OP.LoginRequest and op ~= OP.LoginResponse end

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

-- SCSI: name, data direction and LBA of a CDB (decode_cdb in engine/src/scsi/cdb.cpp, for a
-- disk, as the engine decodes commands). Each entry: name, direction, and where the LBA is
-- (offset and size in bytes) or a function of the CDB giving name, direction, LBA.
local CDB = {
  [0x00] = { "TEST UNIT READY" }, [0x01] = { "REZERO UNIT" }, [0x03] = { "REQUEST SENSE", "read" },
  [0x05] = { "READ BLOCK LIMITS", "read" }, [0x07] = { "REASSIGN BLOCKS", "write" },
  [0x12] = { "INQUIRY", "read" }, [0x15] = { "MODE SELECT(6)", "write" },
  [0x16] = { "RESERVE(6)" }, [0x17] = { "RELEASE(6)" }, [0x1a] = { "MODE SENSE(6)", "read" },
  [0x1b] = { "START STOP UNIT" }, [0x1c] = { "RECEIVE DIAGNOSTIC RESULTS", "read" },
  [0x1d] = { "SEND DIAGNOSTIC", "write" }, [0x1e] = { "PREVENT ALLOW MEDIUM REMOVAL" },
  [0x23] = { "READ FORMAT CAPACITIES", "read" }, [0x25] = { "READ CAPACITY(10)", "read" },
  [0x28] = { "READ(10)", "read", 2, 4 }, [0x2a] = { "WRITE(10)", "write", 2, 4 },
  [0x2b] = { "SEEK(10)" }, [0x2e] = { "WRITE AND VERIFY(10)", "write", 2, 4 },
  [0x34] = { "PRE-FETCH(10)", nil, 2, 4 }, [0x35] = { "SYNCHRONIZE CACHE(10)", nil, 2, 4 },
  [0x37] = { "READ DEFECT DATA(10)", "read" }, [0x3b] = { "WRITE BUFFER", "write" },
  [0x3c] = { "READ BUFFER", "read" }, [0x41] = { "WRITE SAME(10)", "write", 2, 4 },
  [0x42] = { "UNMAP", "write" }, [0x43] = { "READ TOC/PMA/ATIP", "read" },
  [0x46] = { "GET CONFIGURATION", "read" }, [0x4a] = { "GET EVENT STATUS NOTIFICATION", "read" },
  [0x4c] = { "LOG SELECT", "write" }, [0x4d] = { "LOG SENSE", "read" },
  [0x51] = { "READ DISC INFORMATION", "read" }, [0x55] = { "MODE SELECT(10)", "write" },
  [0x56] = { "RESERVE(10)" }, [0x57] = { "RELEASE(10)" }, [0x5a] = { "MODE SENSE(10)", "read" },
  [0x5e] = { "PERSISTENT RESERVE IN", "read" }, [0x5f] = { "PERSISTENT RESERVE OUT", "write" },
  [0x7f] = { "VARIABLE LENGTH" }, [0x83] = { "EXTENDED COPY", "write" },
  [0x84] = { "RECEIVE COPY RESULTS", "read" }, [0x88] = { "READ(16)", "read", 2, 8 },
  [0x89] = { "COMPARE AND WRITE", "write", 2, 8 }, [0x8a] = { "WRITE(16)", "write", 2, 8 },
  [0x8e] = { "WRITE AND VERIFY(16)", "write", 2, 8 }, [0x91] = { "SYNCHRONIZE CACHE(16)", nil, 2, 8 },
  [0x93] = { "WRITE SAME(16)", "write", 2, 8 }, [0xa0] = { "REPORT LUNS", "read" },
  [0xa5] = { "MOVE MEDIUM" }, [0xa8] = { "READ(12)", "read", 2, 4 },
  [0xaa] = { "WRITE(12)", "write", 2, 4 }, [0xad] = { "READ DISC STRUCTURE", "read" },
  [0xb8] = { "READ ELEMENT STATUS", "read" }, [0xbb] = { "SET CD SPEED" },
  [0xbe] = { "READ CD", "read", 2, 4 },
}
-- BYTCHK != 0: the initiator sends data to compare.
local function verify(name)
  return function(c) return name, (c:byte(2) % 8 >= 2) and "write" or nil end
end
CDB[0x2f] = { verify("VERIFY(10)"), nil, 2, 4 }
CDB[0x8f] = { verify("VERIFY(16)"), nil, 2, 8 }
CDB[0xaf] = { verify("VERIFY(12)"), nil, 2, 4 }
CDB[0x04] = { function(c) return "FORMAT UNIT", hasbit(c:byte(2), 0x10) and "write" or nil end }
CDB[0x08] = { "READ(6)", "read", 1, 3 }
CDB[0x0a] = { "WRITE(6)", "write", 1, 3 }
-- ATA PASS-THROUGH: T_LENGTH 0 means no data; T_DIR the direction.
local function ata(name)
  return function(c)
    local b2 = c:byte(3)
    if b2 % 4 == 0 then return name, nil end
    return name, hasbit(b2, 0x08) and "read" or "write"
  end
end
CDB[0x85] = { ata("ATA PASS-THROUGH(16)") }
CDB[0xa1] = { ata("ATA PASS-THROUGH(12)") }
CDB[0x9e] = { function(c)
  local sa = c:byte(2) % 32
  if sa == 0x10 then return "READ CAPACITY(16)", "read" end
  if sa == 0x12 then return "GET LBA STATUS", "read", 2, 8 end
  return "SERVICE ACTION IN(16)", "read"
end }
CDB[0xa3] = { function(c)
  local sa = c:byte(2) % 32
  local n = ({ [0x0a] = "REPORT TARGET PORT GROUPS", [0x0c] = "REPORT SUPPORTED OPERATION CODES",
               [0x0d] = "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS" })[sa]
  return n or "MAINTENANCE IN", "read"
end }
CDB[0xa4] = { function(c)
  return c:byte(2) % 32 == 0x0a and "SET TARGET PORT GROUPS" or "MAINTENANCE OUT", "write"
end }

-- An unsigned 64-bit big-endian field as exact decimal digits (doubles hold only 53 bits).
local function be64_decimal(s, p)
  local limbs = { 0 }  -- base 10^7, least significant first
  for k = 0, 3 do
    local carry = be16(s, p + 2 * k)
    for i = 1, #limbs do
      local v = limbs[i] * 65536 + carry
      limbs[i] = v % 10000000
      carry = floor(v / 10000000)
    end
    while carry > 0 do
      limbs[#limbs + 1] = carry % 10000000
      carry = floor(carry / 10000000)
    end
  end
  local out = { string.format("%.0f", limbs[#limbs]) }
  for i = #limbs - 1, 1, -1 do out[#out + 1] = string.format("%07.0f", limbs[i]) end
  return table.concat(out)
end

-- name, direction ("read", "write" or nil), known, and the LBA of a read or write (decimal
-- string, nil for other commands) of a 16-byte CDB.
local function decode_cdb(cdb)
  local op = cdb:byte(1)
  local e = CDB[op]
  if not e then return string.format("0x%02x", op), nil, false, nil end
  local name, dir, at, size = e[1], e[2], e[3], e[4]
  if type(name) == "function" then
    local n, d, a, z = name(cdb)
    name, dir = n, d
    if a then at, size = a, z end
  end
  local lba
  if at and dir then
    if size == 8 then lba = be64_decimal(cdb, at + 1)
    elseif size == 4 then lba = string.format("%.0f", be32(cdb, at + 1))
    else lba = string.format("%.0f", be24(cdb, at + 1) % 2097152) end  -- READ/WRITE(6): 21 bits
  end
  return name, dir, true, lba
end

-- Sense key, ASC and ASCQ (nil when absent) of a SCSI Response's data segment: a 2-byte
-- SenseLength, then fixed or descriptor sense data (parse_iscsi_sense in cdb.cpp).
local function iscsi_sense(data)
  if not data or #data < 2 then return nil end
  local s = data:sub(3, 2 + min(be16(data, 1), #data - 2))
  if #s == 0 then return nil end
  local code = s:byte(1) % 128
  if code == 0x70 or code == 0x71 then
    if #s < 3 then return nil end
    if #s >= 14 and s:byte(8) >= 6 then return s:byte(3) % 16, s:byte(13), s:byte(14) end
    return s:byte(3) % 16
  elseif code == 0x72 or code == 0x73 then
    if #s < 4 then return nil end
    return s:byte(2) % 16, s:byte(3), s:byte(4)
  end
  return nil
end

local STATUS_KNOWN = { [0x00] = "GOOD", [0x02] = "CHECK CONDITION", [0x04] = "CONDITION MET",
  [0x08] = "BUSY", [0x10] = "INTERMEDIATE", [0x14] = "INTERMEDIATE-CONDITION MET",
  [0x18] = "RESERVATION CONFLICT", [0x22] = "COMMAND TERMINATED", [0x28] = "TASK SET FULL",
  [0x30] = "ACA ACTIVE", [0x40] = "TASK ABORTED" }

-- plausible_bhs(strict): a port of check() in engine/src/iscsi/pdu.cpp. max_dl: the largest
-- DataSegmentLength taken as real (the receiver's MRDSL bound after login).
local MAX_DATA_SEGMENT = 0xffffff
local function plausible(b, from_initiator, strict, max_dl)
  local op = b.opcode
  if not OPNAMES[op] then return false end
  if is_initiator_opcode(op) ~= from_initiator then return false end
  if b.byte0 >= 0x80 then return false end
  if b.data_length > (max_dl or MAX_DATA_SEGMENT) then return false end
  if b.ahs_words > 64 then return false end  -- an extended CDB (248 bytes) and a read length
  if not strict then return true end
  local f = b.flags
  if not from_initiator and b.immediate then return false end
  if b.ahs_words ~= 0 and op ~= OP.ScsiCommand then return false end
  local lun0 = b.lun_hi == 0 and b.lun_lo == 0
  if op == OP.NopOut then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w32 ~= 0 or b.w36 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
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
    if b.w40 ~= 0 or b.w44 ~= 0 then return false end
    return true
  elseif op == OP.LoginRequest or op == OP.LoginResponse then
    if op == OP.LoginRequest and not b.immediate then return false end
    if hasbit(f, 0x80) and hasbit(f, 0x40) then return false end
    if hasbit(f, 0x20) or hasbit(f, 0x10) then return false end
    local csg, nsg, t = floor(f / 4) % 4, f % 4, hasbit(f, 0x80)
    if csg == 2 or (t and (nsg == 2 or nsg <= csg)) then return false end
    -- An all-zero ISID is no real initiator's; ISID type 3 is reserved.
    if (b.lun_hi == 0 and floor(b.lun_lo / 65536) == 0) or b.lun_hi >= 0xc0000000 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w40 ~= 0 or b.w44 ~= 0 then return false end
    if op == OP.LoginRequest then
      if b.w20 % 65536 ~= 0 then return false end
      if b.w32 ~= 0 or b.w36 ~= 0 then return false end
    else
      if b.w20 ~= 0 then return false end
      if floor(b.w36 / 16777216) > 3 or b.w36 % 65536 ~= 0 then return false end
    end
    return true
  elseif op == OP.TextRequest or op == OP.TextResponse then
    -- F and C together are an error; neither is what zero-filled data looks like.
    if f % 64 ~= 0 or (hasbit(f, 0x80) == hasbit(f, 0x40)) then return false end
    if b.itt == RESERVED_TAG then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w36 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
    if op == OP.TextRequest and b.w32 ~= 0 then return false end
    return true
  elseif op == OP.DataOut then
    if f % 128 ~= 0 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w24 ~= 0 or b.w32 ~= 0 or b.w44 ~= 0 then return false end
    if b.data_length == 0 or b.itt == RESERVED_TAG then return false end
    if b.w40 + b.data_length > 0xffffffff then return false end
    return true
  elseif op == OP.LogoutRequest then
    if not hasbit(f, 0x80) or f % 128 > 2 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if b.w20 % 65536 ~= 0 or b.w32 ~= 0 or b.w36 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
    return true
  elseif op == OP.SnackRequest then
    if floor(f / 16) ~= 8 or f % 16 > 3 then return false end
    if b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if b.w24 ~= 0 or b.w32 ~= 0 or b.w36 ~= 0 then return false end
    return true
  elseif op == OP.NopIn then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.w36 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
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
    if b.data_length ~= 0 or not lun0 or b.w20 ~= 0 or b.w36 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
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
    if b.w40 + b.data_length > 0xffffffff then return false end
    return true
  elseif op == OP.LogoutResponse then
    if f ~= 0x80 or b.byte2 > 3 or b.byte3 ~= 0 then return false end
    if b.data_length ~= 0 or not lun0 or b.w20 ~= 0 or b.w36 ~= 0 or b.w44 ~= 0 then return false end
    return true
  elseif op == OP.R2T then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 or b.data_length ~= 0 then return false end
    if b.w44 == 0 or b.w20 == RESERVED_TAG then return false end
    if b.w40 + b.w44 > 0xffffffff then return false end
    return true
  elseif op == OP.AsyncMessage then
    if f ~= 0x80 or b.byte2 ~= 0 or b.byte3 ~= 0 then return false end
    if b.itt ~= RESERVED_TAG or b.w20 ~= 0 or b.w44 ~= 0 then return false end
    local ev = floor(b.w36 / 16777216)
    if ev > 4 and ev ~= 255 then return false end
    return true
  elseif op == OP.Reject then
    if f ~= 0x80 or b.byte3 ~= 0 then return false end
    if b.byte2 < 1 or b.byte2 > 0x0c then return false end
    if not lun0 or b.itt ~= RESERVED_TAG or b.w20 ~= 0 or b.w40 ~= 0 or b.w44 ~= 0 then return false end
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

---------------------------------------------------------------------------------------------
-- Streaming framer (engine/src/iscsi/framer.cpp). Events go to `sink`:
--   sink:on_pdu_start(bhs, first_abs), sink:on_pdu_end(bhs, first_abs, kept, data_incomplete,
--   truncated), sink:on_sync_lost().

local Framer = {}
Framer.__index = Framer
local CARRY, PROBE = 47, 52

function Framer.new(from_initiator)
  local f = setmetatable({ from_initiator = from_initiator, hd = "unknown", dd = "unknown",
    next_abs = 0, chunk_base = 0, chunk_end = 0, carry = "", carry_abs = 0, candidate = false,
    login_possible = true, max_dl = MAX_DATA_SEGMENT, pdus = 0, resyncs = 0, digest_bad = false },
    Framer)
  f:reset_pdu()
  return f
end

-- max_dl: a longer DataSegmentLength is taken as lost framing (then resync).
function Framer:set_digests(h, d, max_dl)
  self.login_possible = false  -- digests are settled when login is over
  self.hd = h and "on" or "off"
  self.dd = d and "on" or "off"
  self.max_dl = max_dl or MAX_DATA_SEGMENT
end

function Framer:reset_pdu()
  self.state = "header"
  self.hdr = ""
  self.bhs = nil
  self.started = false
  self.hdr_need = 48
  self.tail = ""
  self.tail_lost = false
  self.keep = ""
end

function Framer:start_unsynced()
  self.login_possible = false
  self:reset_pdu()
  self.state = "scan"
  self.candidate = false
  self.carry = ""
end

function Framer:push_back(bytes, abs)
  self.pushback = bytes
  self.pushback_abs = abs
end

function Framer:feed(chunk, sink)
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs + #chunk
  self.next_abs = self.chunk_end
  self:run(chunk, self.chunk_base)
end

function Framer:run(s, base)
  local i = 1
  while true do
    if self.pushback then
      s = self.pushback .. s:sub(i)
      base = self.pushback_abs
      i = 1
      self.pushback = nil
    end
    if i > #s then break end
    i = i + self:step(s, i, base + i - 1)
  end
end

function Framer:step(s, i, abs)
  local st = self.state
  if st == "scan" then return self:step_scan(s, i, abs)
  elseif st == "header" then return self:step_header(s, i, abs)
  elseif st == "data" then return self:step_data(s, i, abs)
  elseif st == "data_digest" then return self:step_data_digest(s, i, abs)
  else return self:step_probe(s, i, abs, false) end
end

function Framer:candidate_at(s, p)
  local b0 = s:byte(p)
  if b0 >= 0x80 then return false end
  local op = b0 % 64
  if not OPNAMES[op] or is_initiator_opcode(op) ~= self.from_initiator then return false end
  -- Login happens once, first: after Full Feature Phase PDUs a "Login" header is payload.
  if not self.login_possible and not carries_digests(op) then return false end
  return plausible(parse_bhs(s, p), self.from_initiator, true, self.max_dl)
end

function Framer:enter_candidate(at)
  self:reset_pdu()
  self.candidate = true
  self.pdu_abs = at
end

function Framer:step_scan(s, i, abs)
  local nin = #s - i + 1
  local carry = self.carry
  if #carry > 0 then
    local take = min(nin, CARRY)
    local win = carry .. s:sub(i, i + take - 1)
    local p = 1
    while p <= #carry and p + 47 <= #win do
      if self:candidate_at(win, p) then
        local head = carry:sub(p)
        local at = self.carry_abs + p - 1
        self.carry = ""
        self:enter_candidate(at)
        self.hdr = head
        return 0
      end
      p = p + 1
    end
    if #carry - 1 + 48 <= #win then
      self.carry = ""
      return 0
    end
    carry = carry .. s:sub(i)
    if #carry > CARRY then
      local drop = #carry - CARRY
      carry = carry:sub(drop + 1)
      self.carry_abs = self.carry_abs + drop
    end
    self.carry = carry
    return nin
  end
  local p = i
  local last = #s - 47
  while p <= last do
    if self:candidate_at(s, p) then
      self:enter_candidate(abs + (p - i))
      return p - i
    end
    p = p + 1
  end
  local keep = min(nin, CARRY)
  self.carry = s:sub(#s - keep + 1)
  self.carry_abs = abs + (nin - keep)
  return nin
end

function Framer:step_header(s, i, abs)
  if #self.hdr == 0 then self.pdu_abs = abs end
  local nin = #s - i + 1
  local take = min(nin, self.hdr_need - #self.hdr)
  self.hdr = self.hdr .. s:sub(i, i + take - 1)
  if #self.hdr < self.hdr_need then return take end
  if not self.bhs then
    local b = parse_bhs(self.hdr)
    self.bhs = b
    if not plausible(b, self.from_initiator, self.candidate, self.max_dl) then
      if self.candidate then
        self:reject_candidate()
      else
        local at = self.pdu_abs
        local rest = self.hdr:sub(2)
        self:reset_pdu()
        self:lose_sync(at)
        self:push_back(rest, at + 1)
      end
      return take
    end
    self.hd_this = carries_digests(b.opcode) and self.hd ~= "off"
    self.hdr_need = header_length(b, self.hd_this)
    if #self.hdr < self.hdr_need then return take end
  end
  self:header_complete()
  return take
end

function Framer:reject_candidate()
  local at = self.pdu_abs + 1
  local rest = self.hdr:sub(2)
  self:reset_pdu()
  self.candidate = false
  self.state = "scan"
  self:push_back(rest, at)
end

function Framer:header_complete()
  local b = self.bhs
  local hlen = header_length(b, false)
  self.digest_bad = false
  if self.hd_this then
    local c = crc32c_final(crc32c_update(crc32c_init(), self.hdr, 1, hlen))
    local match = c == digest_from_wire(self.hdr, hlen + 1)
    if self.hd == "on" then
      if not match and self.candidate then
        self:reject_candidate()
        return
      end
      self.digest_bad = not match
    elseif match then
      self.hd = "on"
    else
      if not self.candidate then self.hd = "off" end
      self.hd_this = false
      self:push_back(self.hdr:sub(hlen + 1, hlen + 4), self.pdu_abs + hlen)
      self.hdr = self.hdr:sub(1, hlen)
    end
  end
  if self.candidate then
    self.candidate = false
    self.resyncs = self.resyncs + 1
  end
  self.started = true
  if carries_digests(b.opcode) then self.login_possible = false end
  self.sink:on_pdu_start(b, self.pdu_abs)
  self:begin_data()
end

function Framer:begin_data()
  local b = self.bhs
  local dl = b.data_length
  self.data_left = dl
  self.pad_left = pad4(dl) - dl
  self.crc = crc32c_init()
  self.crc_valid = true
  self.data_incomplete = false
  self.keep = ""
  self.keep_limit = min(kept_data_limit(b), dl)
  self.tail = ""
  self.tail_lost = false
  local digests = carries_digests(b.opcode) and dl > 0
  self.dd_this = digests and self.dd == "on"
  self.dd_probe = digests and self.dd == "unknown"
  if dl == 0 then
    self:end_pdu(self.pdu_abs + #self.hdr - 1, false)
  else
    self.state = "data"
  end
end

function Framer:step_data(s, i, abs)
  local nin = #s - i + 1
  local take = min(nin, self.data_left + self.pad_left)
  local d = min(take, self.data_left)
  if #self.keep < self.keep_limit then
    local k = min(d, self.keep_limit - #self.keep)
    self.keep = self.keep .. s:sub(i, i + k - 1)
  end
  if (self.dd_this or self.dd_probe) and self.crc_valid then
    self.crc = crc32c_update(self.crc, s, i, i + take - 1)
  end
  self.data_left = self.data_left - d
  self.pad_left = self.pad_left - (take - d)
  if self.data_left + self.pad_left == 0 then
    if self.dd_this or self.dd_probe then
      self.state = self.dd_this and "data_digest" or "probe"
      self.tail = ""
      self.tail_abs = abs + take
    else
      self:end_pdu(abs + take - 1, false)
    end
  end
  return take
end

function Framer:step_data_digest(s, i, abs)
  local take = min(#s - i + 1, 4 - #self.tail)
  self.tail = self.tail .. s:sub(i, i + take - 1)
  if #self.tail < 4 then return take end
  if self.crc_valid and not self.tail_lost and digest_from_wire(self.tail, 1) ~= crc32c_final(self.crc) then
    self.digest_bad = true
  end
  self:end_pdu(abs + take - 1, false)
  return take
end

function Framer:plausible_at(t, at)
  if #t < at + 48 then return false end
  return plausible(parse_bhs(t, at + 1), self.from_initiator, true, self.max_dl)
end

function Framer:step_probe(s, i, abs, force)
  local take = 0
  if s then
    take = min(#s - i + 1, PROBE - #self.tail)
    self.tail = self.tail .. s:sub(i, i + take - 1)
  end
  local t = self.tail
  local crc_match = self.crc_valid and #t >= 4 and digest_from_wire(t, 1) == crc32c_final(self.crc)
  -- A CRC that was computable and did not match: 4 bytes that can start a BHS already say "no
  -- digest" (waiting for 48 would delay this PDU's end until the peer's next PDU).
  local at0 = not crc_match and (self:plausible_at(t, 0) or
    (self.crc_valid and #t >= 4 and #t < 48 and self:could_start_bhs(t)))
  if not crc_match and not at0 and #t < PROBE and not force then return take end
  local on, commit = crc_match, true
  if not on then
    local at4 = self:plausible_at(t, 4)
    on = at4 and not at0
    commit = at0 ~= at4
  end
  if commit then self.dd = on and "on" or "off" end
  local probe, probe_abs = t, self.tail_abs
  if on and #probe >= 4 then
    if not crc_match and self.crc_valid then self.digest_bad = true end
    self:end_pdu(probe_abs + 3, false)
    if #probe > 4 then self:push_back(probe:sub(5), probe_abs + 4) end
  else
    self:end_pdu(probe_abs - 1, false)
    if #probe > 0 then self:push_back(probe, probe_abs) end
  end
  return take
end

function Framer:could_start_bhs(t)
  local b0 = t:byte(1)
  if b0 >= 0x80 then return false end
  local op = b0 % 64
  if not OPNAMES[op] or is_initiator_opcode(op) ~= self.from_initiator then return false end
  if not self.from_initiator and b0 >= 0x40 then return false end
  return true
end

function Framer:end_pdu(last_abs, truncated)
  local b = self.bhs
  local first, keep, inc = self.pdu_abs, self.keep, self.data_incomplete
  local kept_truncated = #keep < b.data_length
  self.pdus = self.pdus + 1
  self:reset_pdu()
  self.sink:on_pdu_end(b, first, last_abs, keep, kept_truncated, inc, truncated, self.digest_bad)
end

function Framer:lose_sync(at)
  self:reset_pdu()
  self.state = "scan"
  self.candidate = false
  self.carry = ""
  self.sink:on_sync_lost(at)
end

function Framer:gap(lost, sink)
  if lost == 0 then return end
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs
  local at = self.next_abs
  self.next_abs = self.next_abs + lost
  local left = lost
  while true do
    local st = self.state
    if st == "scan" then
      self.carry = ""
      return
    elseif st == "probe" then
      self:step_probe(nil, 1, at, true)
      self:run("", at)
    elseif st == "header" then
      if self.candidate then
        self:reset_pdu()
        self.candidate = false
        self.state = "scan"
      else
        self:lose_sync(at)
      end
    elseif st == "data" then
      local inn = min(left, self.data_left + self.pad_left)
      local d = min(inn, self.data_left)
      if d > 0 then
        self.data_incomplete = true
        self.keep_limit = #self.keep
      end
      self.crc_valid = false
      self.data_left = self.data_left - d
      self.pad_left = self.pad_left - (inn - d)
      left = left - inn
      at = at + inn
      if self.data_left + self.pad_left > 0 then return end
      if self.dd_this then
        self.state = "data_digest"
        self.tail = ""
        self.tail_abs = at
      elseif self.dd_probe then
        if left == 0 then
          self.state = "probe"
          self.tail = ""
          self.tail_abs = at
          return
        end
        self:end_pdu(at - 1, false)
        self:lose_sync(at)
      else
        self:end_pdu(at - 1, false)
        if left == 0 then return end
        self:lose_sync(at)
      end
    else -- data_digest
      local inn = min(left, 4 - #self.tail)
      self.tail = self.tail .. string.rep("\0", inn)
      self.tail_lost = true
      left = left - inn
      at = at + inn
      if #self.tail < 4 then return end
      self:end_pdu(at - 1, false)
      if left == 0 then return end
      self:lose_sync(at)
    end
  end
end

function Framer:finish(sink)
  self.sink = sink
  self.chunk_base = self.next_abs
  self.chunk_end = self.next_abs
  if self.state == "probe" then
    self:step_probe(nil, 1, self.next_abs, true)
    self:run("", self.next_abs)
  end
  if self.started then
    self:end_pdu(self.next_abs == 0 and 0 or self.next_abs - 1, true)
  end
  if self.state == "scan" then self.carry = "" else self:reset_pdu() end
end

---------------------------------------------------------------------------------------------
-- PduStream (engine/src/session/pdu_stream.cpp): framer events per segment, each PDU's first
-- byte mapped back to the segment (frame, time) that carried it.

local PduStream = {}
PduStream.__index = PduStream

function PduStream.new(from_initiator)
  return setmetatable({ framer = Framer.new(from_initiator), events = {}, open = false,
                        recent = {}, abs = 0, cur_frame = 0, cur_t = 0 }, PduStream)
end

function PduStream:remember(abs, frame, t)
  local r = self.recent
  r[#r + 1] = { abs = abs, frame = frame, t = t }
  if #r > 64 then table.remove(r, 1) end
end

function PduStream:locate(off, ev)
  local fr = self.framer
  if off >= fr.chunk_base and off < fr.chunk_end then
    ev.first_frame, ev.first_t = self.cur_frame, self.cur_t
    return
  end
  local r = self.recent
  for k = #r, 1, -1 do
    if r[k].abs <= off then
      ev.first_frame, ev.first_t = r[k].frame, r[k].t
      return
    end
  end
  ev.first_frame, ev.first_t = 0, 0
end

function PduStream:feed(bytes, frame, t)
  self.events = {}
  self.cur_frame, self.cur_t = frame, t
  self:remember(self.abs, frame, t)
  self.framer:feed(bytes, self)
  self.abs = self.abs + #bytes
  return self.events
end

function PduStream:gap(lost)
  self.framer:gap(lost, self)
  self.abs = self.abs + lost
  self:remember(self.abs, 0, 0)
end

function PduStream:finish()
  self.events = {}
  self.framer:finish(self)
  return self.events
end

function PduStream:on_pdu_start(b, first_abs)
  local ev = { type = "start", bhs = b }
  self:locate(first_abs, ev)
  self.events[#self.events + 1] = ev
  self.open = true
end

function PduStream:on_pdu_end(b, first_abs, last_abs, kept, kept_truncated, data_incomplete, truncated,
                               digest_bad)
  local ev = { type = "end", bhs = b, data = kept, kept_truncated = kept_truncated,
               data_incomplete = data_incomplete, truncated = truncated, digest_bad = digest_bad }
  self:locate(first_abs, ev)
  -- The segment with the PDU's last byte: the status frame of a SCSI Response.
  local last = {}
  self:locate(last_abs, last)
  ev.last_frame, ev.last_t = last.first_frame, last.first_t
  self.events[#self.events + 1] = ev
  self.open = false
end

function PduStream:on_sync_lost() self.open = false end

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
    local sc = floor(b.w36 / 16777216)
    if sc ~= 0 then self.result.failed = true end
    if sc == 0 and hasbit(b.flags, 0x80) and b.flags % 4 == 3 and not hasbit(b.flags, 0x40) then
      self.result.complete = true
    end
  end
  self:recompute()
end

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

---------------------------------------------------------------------------------------------
-- TCP flow, one direction (engine/src/tcp/flow.*)

local Flow = {}
Flow.__index = Flow

function Flow.new()
  return setmetatable({ started = false, syn_seen = false, fin_seen = false, next = 0, max_end = 0,
    una = 0, una_known = false, peer_window = 0, peer_window_known = false, wscale_offered = -1, mss = 0,
    mss_from_syn = false, largest_payload = 0, data_options_len = 0, has_small = false, last_small = nil,
    last_data_t = 0, last_data_frame = 0, has_last_data = false,
    unacked = {}, ua_head = 1, ua_tail = 0, ooo = {}, ooo_count = 0, ooo_bytes = 0,
    hole_since = 0, bytes_missing = 0, ref = 0, acked_h = -1, acked_cmd = 0, acked_data_t = 0,
    acked_data_frame = 0,
    acks = {}, ak_head = 1, ak_tail = 0 }, Flow)
end

function Flow:unwrap(seq)
  local d = (seq - self.ref % TWO32) % TWO32
  if d >= 2147483648 then d = d - TWO32 end
  return self.ref + d
end
function Flow:anchor(seq)
  self.ref = TWO32 + seq
  self.started = true
  self.next, self.max_end, self.una = self.ref, self.ref, self.ref
end
function Flow:move_ref(abs) self.ref = abs end
-- The SYN's MSS option does not count the TCP options of data segments (timestamps make 1460
-- into 1448): the option less the options of the last data segment.
function Flow:effective_mss()
  local mss = self.mss
  if mss ~= 0 then
    local o = self.data_options_len
    if o ~= 0 and o < mss then return mss - o end
    if self.largest_payload <= mss and self.largest_payload + 40 >= mss then return self.largest_payload end
    return mss
  end
  local lo = RULES.mss_fallback_min
  return self.largest_payload > lo and self.largest_payload or lo
end
function Flow:is_small(len) return len < self:effective_mss() end

function Flow:acked(ack, t, frame)
  if self.una_known and ack <= self.una then return false end
  self.una = ack
  self.una_known = true
  local u = self.unacked
  local function take(r)
    if r.h and r.h >= 0 then self.acked_h, self.acked_cmd = r.h, r.cmd end
  end
  while self.ua_head <= self.ua_tail and u[self.ua_head].e <= ack do
    take(u[self.ua_head])
    self.acked_data_t, self.acked_data_frame = u[self.ua_head].t, u[self.ua_head].frame
    u[self.ua_head] = nil
    self.ua_head = self.ua_head + 1
  end
  if self.ua_head <= self.ua_tail and u[self.ua_head].s < ack then take(u[self.ua_head]) end
  local s = self.last_small
  if self.has_small and not s.acked and ack >= s.e then
    s.acked = true
    s.ack_t = t
    s.ack_frame = frame
  end
  return true
end

-- An ACK from the peer that moved the edge of what this side may send (acknowledged more or
-- changed the window): kept a while, since a sender may be released by an ACK older than the
-- latest (the capture point is one side's round trip away from the sender).
local MAX_ACK_RECORDS = 4096
function Flow:record_ack(r, horizon)
  local a = self.acks
  while self.ak_head <= self.ak_tail and (a[self.ak_head].t < horizon or
        self.ak_tail - self.ak_head + 1 >= MAX_ACK_RECORDS) do
    a[self.ak_head] = nil
    self.ak_head = self.ak_head + 1
  end
  self.ak_tail = self.ak_tail + 1
  a[self.ak_tail] = r
end

-- Index of the first unacknowledged record whose end is beyond v, or nil.
function Flow:first_unacked_ending_after(v)
  local lo, hi = self.ua_head, self.ua_tail + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if self.unacked[mid].e <= v then lo = mid + 1 else hi = mid end
  end
  if lo <= self.ua_tail then return lo end
  return nil
end

function Flow:push_unacked(rec)
  if self.ua_tail - self.ua_head + 1 >= 65536 then return end
  self.ua_tail = self.ua_tail + 1
  self.unacked[self.ua_tail] = rec
end

function Flow:ooo_first()
  local best
  for k in pairs(self.ooo) do if not best or k < best then best = k end end
  return best
end

---------------------------------------------------------------------------------------------
-- Connection (engine/src/session/connection.cpp)

local I2T, T2I = 0, 1
local function side_of(dir) return dir == I2T and "initiator" or "target" end

local Connection = {}
Connection.__index = Connection

local function starts_with_login(payload, dir)
  if #payload < 48 then return false end
  local want = dir == I2T and OP.LoginRequest or OP.LoginResponse
  if payload:byte(1) % 64 ~= want then return false end
  return plausible(parse_bhs(payload), dir == I2T, true)
end

function Connection.new(an, id, initiator, target)
  local c = setmetatable({ an = an, id = id, initiator = initiator, target = target,
    opt = an.options, flow = { [0] = Flow.new(), [1] = Flow.new() },
    pdus = { [0] = PduStream.new(true), [1] = PduStream.new(false) },
    rtt = { [0] = { known = false, min = 0, hs = false }, [1] = { known = false, min = 0, hs = false } },
    saw_syn = false, saw_synack = false, closed = false, syn_t = 0, synack_t = 0,
    mid_session = false, keys = default_keys(), login = Negotiation.new(), login_done = false,
    saw_login = false, initiator_name = "", target_name = "", isid = "", tsih = 0,
    header_digest = false, data_digest = false, by_itt = {}, open_count = 0, current_slot = { [0] = nil, [1] = nil },
    slots = {}, slot_count = 0, free_slots = {},
    frames = 0, commands = 0, completed = 0, outstanding = 0, max_outstanding = 0,
    serial_commands = 0, serial_wait_ms = 0, serial_cycle_ms = 0, serial_crossing_ms = 0, first_command_frame = 0,
    retransmissions = 0, digest_errors = 0, session = nil, orphans = {}, settling = { head = 1, tail = 0 } }, Connection)
  return c
end

local function rtt_sample(r, ns, hs)
  if ns < 0 then return end
  if hs then r.hs = true end
  if not r.known or ns < r.min then r.min = ns end
  r.known = true
end

function Connection:session_id()
  if self.session then return self.session end
  local key
  if self.login_done then
    key = "login:" .. self.initiator_name .. "|" .. self.isid .. "|" .. self.target_name .. "|" .. self.tsih
  else
    key = "connection:" .. self.id
  end
  self.session = self.an:resolve_session(key, self)
  return self.session
end

function Connection:rtt_ns(dir) local r = self.rtt[dir]; return r.known and r.min or 0 end
function Connection:full_rtt_ns() return self:rtt_ns(I2T) + self:rtt_ns(T2I) end
-- Jitter allowance when matching a release to the ACK that caused it (integer ns, as the engine).
function Connection:tolerance_ns()
  return floor(RULES.release_tolerance_ms * 1e6 + 0.5) + floor(self:full_rtt_ns() / RULES.release_tolerance_rtt_divisor)
end

function Connection:on_segment(seg, dir)
  self.frames = self.frames + 1
  local fl = seg.flags
  local una_before = self.flow[1 - dir].una
  if hasbit(fl, 0x02) then self:handle_handshake(seg, dir) end
  if hasbit(fl, 0x10) then self:handle_ack(seg, dir) end
  if seg.wire_len > 0 and not hasbit(fl, 0x02) then self:handle_payload(seg, dir) end
  local f = self.flow[dir]
  if hasbit(fl, 0x01) or hasbit(fl, 0x04) then
    f.fin_seen = true
    if hasbit(fl, 0x04) or self.flow[1 - dir].fin_seen then self.closed = true end
  end
  self.last_t = seg.t
  local win = seg.window
  local scale = self.flow[dir].wscale_offered
  if not hasbit(fl, 0x02) and scale >= 0 and self.flow[1 - dir].wscale_offered >= 0 then
    win = win * 2 ^ min(scale, 14)
  end
  local other = self.flow[1 - dir]
  local window_changed = other.peer_window_known and other.peer_window ~= win
  other.peer_window = win
  other.peer_window_known = true
  if other.una_known and (other.una ~= una_before or window_changed or other.ak_tail < other.ak_head) then
    -- (what classify_hold may need)
    other:record_ack({ ack = other.una, t = seg.t, frame = seg.frame, window = win, h = other.acked_h,
                       cmd = other.acked_cmd, data_t = other.acked_data_t,
                       data_frame = other.acked_data_frame }, seg.t - RULES.ack_record_keep_rtts * self:full_rtt_ns() - RULES.ack_record_keep_ms * 1e6)
  end
  if self.settling.head <= self.settling.tail then self:settle(seg.t) end
end

function Connection:handle_handshake(seg, dir)
  local f = self.flow[dir]
  if f.syn_seen and f.started and f:unwrap(seg.seq) == f.next - 1 then return end
  f:anchor((seg.seq + 1) % TWO32)
  f.syn_seen = true
  self.pdus[dir].framer:set_digests(false, false)
  f.wscale_offered = seg.wscale or -1
  if seg.mss and seg.mss ~= 0 then
    self.flow[1 - dir].mss = seg.mss
    self.flow[1 - dir].mss_from_syn = true
  end
  if not hasbit(seg.flags, 0x10) then
    self.saw_syn = true
    self.syn_t = seg.t
  elseif self.saw_syn and not self.saw_synack then
    self.saw_synack = true
    self.synack_t = seg.t
    rtt_sample(self.rtt[T2I], seg.t - self.syn_t, true)
  end
end

function Connection:handle_ack(seg, dir)
  local peer = self.flow[1 - dir]
  if not peer.started then return end
  if self.saw_synack and dir == I2T and not self.rtt[I2T].hs and not hasbit(seg.flags, 0x02) then
    rtt_sample(self.rtt[I2T], seg.t - self.synack_t, true)
  end
  local ack = peer:unwrap(seg.ack)
  if ack > peer.max_end + 1073741824 then return end
  if peer.fin_seen and ack == peer.next + 1 then ack = peer.next end  -- the FIN's sequence number
  if peer.ua_head <= peer.ua_tail and (not peer.una_known or ack > peer.una) then
    -- Records end in increasing order (each carries new data): a binary search, not a scan.
    local k = peer:first_unacked_ending_after(ack - 1)
    local s = k and peer.unacked[k]
    if s and s.e == ack then rtt_sample(self.rtt[dir], seg.t - s.t) end
  end
  if ack > peer.next and peer.started then
    local upto = min(ack, peer.max_end > peer.next and peer.max_end or ack)
    self:declare_gap(1 - dir, upto, seg.frame)
  end
  peer:acked(ack, seg.t, seg.frame)
end

function Connection:handle_payload(seg, dir)
  local f = self.flow[dir]
  local len = seg.wire_len
  if not f.started then
    -- No SYN: a stream that starts with a Login PDU is framed from here (no digests until
    -- negotiated); otherwise the capture began mid-stream and framing resumes at a BHS.
    f:anchor(seg.seq)
    if starts_with_login(seg.payload, dir) then
      self.pdus[dir].framer:set_digests(false, false)
    else
      self.mid_session = true
      self.pdus[dir].framer:start_unsynced()
    end
  end
  f.largest_payload = max(f.largest_payload, len)
  if seg.options_len and seg.options_len ~= 0 then f.data_options_len = seg.options_len end
  local start = f:unwrap(seg.seq)
  local e = start + len
  if e <= f.next then
    local keepalive = len <= 1 and start + 1 >= f.next
    if not keepalive then self:note_retransmission(dir, seg, start, e) end
    return
  end
  if start > f.next then
    if f.ooo_count == 0 then f.hole_since = seg.t end
    local held = f.ooo[start]
    if not held then
      held = { bytes = "", t = 0, frame = 0 }
      f.ooo[start] = held
      f.ooo_count = f.ooo_count + 1
    end
    if #held.bytes < #seg.payload then
      f.ooo_bytes = f.ooo_bytes + #seg.payload - #held.bytes
      held.bytes, held.t, held.frame = seg.payload, seg.t, seg.frame
    end
    f.max_end = max(f.max_end, e)
    f:move_ref(e)
    if f.ooo_bytes > self.opt.max_out_of_order_bytes then
      self:declare_gap(dir, f:ooo_first(), seg.frame)
    end
    return
  end
  if f.ooo_count > 0 then
    self.retransmissions = self.retransmissions + 1
    local fd = { kind = "retransmission", side = side_of(dir), frame = seg.frame,
                 lost_ms = ms(seg.t - f.hole_since),
                 detail = "retransmission fills a hole: the original was lost before the capture point" }
    local c = self.current_slot[dir]
    if c and c.used then
      fd.itt, fd.command_first_frame = c.itt, c.first_frame
      c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms
      if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
      self:add_kind(c, "retransmission")
    end
    self:emit_finding(fd)
  end
  local skip = f.next - start
  local bytes = seg.payload
  local wire_rest = len - skip
  if skip < #bytes then bytes = bytes:sub(skip + 1) else bytes = "" end
  local rec = { s = start, e = e, t = seg.t, frame = seg.frame, owner = 0, small = f:is_small(len) }
  self.seg_h, self.seg_cmd, self.seg_itt = -1, 0, 0
  self:deliver(dir, bytes, wire_rest, seg)
  rec.owner = self.current_slot[dir] and self.current_slot[dir].slot or 0
  -- and which command held that slot then: a slot is reused once its command is released
  rec.owner_cmd = self.current_slot[dir] and self.current_slot[dir].first_frame or 0
  rec.h, rec.cmd, rec.itt = self.seg_h, self.seg_cmd, self.seg_itt
  f:push_unacked(rec)
  if rec.small then
    f.has_small = true
    f.last_small = { e = e, t = seg.t, frame = seg.frame, h = rec.h, cmd = rec.cmd, acked = false,
                     ack_t = 0, ack_frame = 0 }
  end
  f.max_end = max(f.max_end, e)
  f.has_last_data = true
  f.last_data_t = seg.t
  f.last_data_frame = seg.frame
  self:drain_out_of_order(dir, seg)
end

function Connection:deliver(dir, bytes, wire_len, seg)
  local f = self.flow[dir]
  local ps = self.pdus[dir]
  local began_mid = ps.open
  local mid_slot = began_mid and self.current_slot[dir] and self.current_slot[dir].slot or 0
  local events = ps:feed(bytes, seg.frame, seg.t)
  if #bytes < wire_len then
    local missing = wire_len - #bytes
    f.bytes_missing = f.bytes_missing + missing
    ps:gap(missing)
  end
  f.next = f.next + wire_len
  f:move_ref(f.next)
  self:on_pdus(dir, seg, events, began_mid, mid_slot)
end

function Connection:drain_out_of_order(dir, seg)
  local f = self.flow[dir]
  -- Held bytes reach the receiver only now, when seg fills the hole before them.
  local outer = self.filling
  self.filling = seg
  while f.ooo_count > 0 do
    local start = f:ooo_first()
    if start > f.next then break end
    local held = f.ooo[start]
    f.ooo[start] = nil
    f.ooo_count = f.ooo_count - 1
    f.ooo_bytes = f.ooo_bytes - #held.bytes
    local e = start + #held.bytes
    if e > f.next then
      local skip = f.next - start
      local bytes = held.bytes:sub(skip + 1)
      local s = { frame = held.frame, t = held.t, wire_len = #bytes, flags = seg.flags }
      self:deliver(dir, bytes, #bytes, s)
    end
  end
  self.filling = outer
end

function Connection:declare_gap(dir, upto, frame)
  local f = self.flow[dir]
  while f.next < upto or (f.ooo_count > 0 and f:ooo_first() <= upto) do
    local hole_end = upto
    if f.ooo_count > 0 then hole_end = min(hole_end, f:ooo_first()) end
    if hole_end > f.next then
      local lost = hole_end - f.next
      f.bytes_missing = f.bytes_missing + lost
      self.pdus[dir]:gap(lost)
      f.next = hole_end
      f:move_ref(f.next)
      local c = self.current_slot[dir]
      if c and c.used then c.data_incomplete = true end
      -- As in the engine, PDU events produced by this gap are not analysed (see lua/README.md).
    end
    if f.ooo_count == 0 then break end
    local first = f.ooo[f:ooo_first()]
    self:drain_out_of_order(dir, { frame = first.frame, t = first.t, flags = 0 })
    if f.ooo_count == 0 or f.next >= upto then break end
  end
end

function Connection:note_retransmission(dir, seg, start, e)
  local f = self.flow[dir]
  self.retransmissions = self.retransmissions + 1
  -- The first record ending past the resent byte (binary search), or one of the next few that
  -- starts before it (an overlap resend): bounded work per segment.
  local orig
  local k = f:first_unacked_ending_after(start)
  if k then
    for j = k, min(k + 7, f.ua_tail) do
      local s = f.unacked[j]
      if s.s <= start then orig = s break end
    end
  end
  if f.una_known and e <= f.una and not orig then return end
  local fd = { kind = "retransmission", side = side_of(dir), frame = seg.frame, lost_ms = 0 }
  if orig then
    fd.related = { { "original", orig.frame } }
    fd.lost_ms = ms(seg.t - orig.t)
    if orig.cmd and orig.cmd ~= 0 then  -- named even when the command completed before the resend
      fd.itt, fd.command_first_frame = orig.itt, orig.cmd
    end
    -- The command in the owner's slot now (engine: a slot index, reused once released).
    local c = self.slots[orig.owner]
    if c and c.used and c.first_frame == orig.owner_cmd then
      fd.itt, fd.command_first_frame = c.itt, c.first_frame
      -- (A settling command's status was captured before this resend, near the target: its
      -- latency stays as captured; the round trip it cost the initiator counts below.)
      if not c.settling then c.loss_pending_ms = c.loss_pending_ms + fd.lost_ms end
      if dir == I2T then c.h_initiator = c.h_initiator + 2 else c.h_target = c.h_target + 2 end
      self:add_kind(c, "retransmission")
    end
  end
  fd.detail = "segment sent again after " .. whole_ms(fd.lost_ms) .. " ms"
  self:emit_finding(fd)
end

-- iSCSI PDUs and commands -------------------------------------------------------------------

-- Above this many open commands the open count is taken as is, without a scan.
local COUNTED_IN_FLIGHT = 64

-- Off the ITT table, the open count and the PDU owners: answered (settling) or gone.
function Connection:retire(c)
  if c.settling then return end  -- retired when it completed
  if self.by_itt[c.itt] == c then
    self.by_itt[c.itt] = nil
    self.open_count = self.open_count - 1
  end
  for d = 0, 1 do if self.current_slot[d] == c then self.current_slot[d] = nil end end
  if self.outstanding > 0 then self.outstanding = self.outstanding - 1 end
end

function Connection:release(c)
  self:retire(c)
  c.used = false
  self.slots[c.slot] = nil
  self.free_slots[#self.free_slots + 1] = c.slot
end

function Connection:on_pdus(dir, seg, events, began_mid, mid_slot)
  local touches = {}
  -- Touches name slots, as in the engine: a slot released and taken again by a command started
  -- in this segment is that command's.
  if began_mid and self.slots[mid_slot] then touches[1] = { slot = mid_slot, role = "cont" } end
  for _, ev in ipairs(events) do
    if ev.type == "start" then
      local c, role = self:touch_for_start(dir, ev, seg)
      self.current_slot[dir] = c
      if c and #touches < 8 and role ~= "start" then
        local dup = false
        for _, t in ipairs(touches) do if t.slot == c.slot then dup = true end end
        if not dup then
          touches[#touches + 1] = { slot = c.slot, role = role, response = ev.bhs.opcode == OP.ScsiResponse }
        end
      end
    end
  end
  local verdict = { held = false, reported = false }
  for _, t in ipairs(touches) do self:analyse_touch(dir, seg, t, verdict) end
  for _, ev in ipairs(events) do
    if ev.type == "end" then self:on_pdu_end(dir, seg, ev) end
  end
end

local function new_breakdown()
  return { request = 0, think = 0, data = 0, nagle = 0, delayed_ack = 0, r2t = 0, window = 0,
           loss = 0, response = 0 }
end

function Connection:touch_for_start(dir, ev, seg)
  local b = ev.bhs
  local op = b.opcode
  if dir == I2T and op == OP.ScsiCommand then
    if b.itt == RESERVED_TAG then return nil end
    local old = self.by_itt[b.itt]
    if old then
      self:emit_command(old)
      self:release(old)
    end
    if self.open_count >= self.opt.max_open_commands then return nil end
    local w = hasbit(b.flags, 0x20)
    local slot = #self.free_slots
    if slot > 0 then
      slot, self.free_slots[slot] = self.free_slots[slot], nil
    else
      self.slot_count = self.slot_count + 1
      slot = self.slot_count
    end
    local c = { used = true, conn = self, slot = slot, session = self:session_id(), itt = b.itt,
      cmdsn = b.w24, bytes = b.w20,
      first_frame = ev.first_frame ~= 0 and ev.first_frame or seg.frame,
      first_t = ev.first_frame ~= 0 and ev.first_t or seg.t,
      write = w, findings_set = {}, findings = {},
      breakdown = new_breakdown(), h_initiator = 1, h_target = 0, last_event_t = 0,
      last_seg_t = { [0] = seg.t, [1] = 0 }, has_seg = { [0] = true, [1] = false },
      needed_t = 0, request_done = false, r2ts = 0, first_r2t_frame = 0, last_r2t_t = 0,
      h_at_r2t = 0, first_reply_frame = 0, solicited_data = false, data_out_bytes = 0,
      data_in_bytes = 0, loss_pending_ms = 0, hold_ms = 0, completed = false,
      data_incomplete = false }
    local cdir, _
    c.op, cdir, _, c.lba = decode_cdb(b.cdb)
    c.kind = c.lba and (cdir == "read" and "read" or "write") or "other"
    if not self.keys.from_login and w and b.data_length > 0 then self.keys.immediate_data = true end
    if w then
      c.unsolicited_expected = min(b.w20, self.keys.initial_r2t and 0 or self.keys.first_burst)
    else
      c.unsolicited_expected = 0
    end
    c.ideal_round_trips = ideal_round_trips(self.keys, w, w and b.w20 or 0)
    c.last_event_t = c.first_t
    self.slots[slot] = c
    self.by_itt[b.itt] = c
    self.open_count = self.open_count + 1
    self.commands = self.commands + 1
    self.outstanding = self.outstanding + 1
    -- Small counts are judged by capture time when commands complete (in_flight_with).
    if self.outstanding > COUNTED_IN_FLIGHT then
      self.max_outstanding = max(self.max_outstanding, self.outstanding)
    end
    if self.first_command_frame == 0 then self.first_command_frame = c.first_frame end
    self.an:on_command_start(c)
    return c, "start"
  end
  if b.itt == RESERVED_TAG then return nil end
  local c = self.by_itt[b.itt]
  if not c then return nil end
  local role
  if op == OP.DataOut then
    if b.w20 ~= RESERVED_TAG then
      role = c.solicited_data and "cont" or "solicited"
      c.solicited_data = true
    else
      role = "cont"
      if self.keys.initial_r2t and not self.keys.from_login then
        self.keys.initial_r2t = false
        self.keys.initial_r2t_inferred = true
      end
    end
  elseif op == OP.R2T then
    role = "reply"
    c.solicited_data = false
  elseif op == OP.DataIn or op == OP.ScsiResponse then
    role = c.has_seg[T2I] and "cont" or "reply"
    if op == OP.ScsiResponse and c.write and c.r2ts > 0 then role = "reply" end
  else
    return nil
  end
  return c, role
end

function Connection:analyse_touch(dir, seg, t, verdict)
  local c = self.slots[t.slot]
  if not c then return end
  local now = seg.t
  local rtt_side = self:rtt_ns(dir)
  local ready
  if t.role == "cont" then
    ready = c.has_seg[dir] and c.last_seg_t[dir] or c.last_event_t
  elseif t.role == "solicited" then
    ready = c.last_r2t_t + rtt_side
  else
    ready = c.needed_t + rtt_side
  end
  local interval = max(0, now - c.last_event_t)
  local crossing = min(max(ready - c.last_event_t, 0), interval)
  local rest = interval - crossing
  local bd = c.breakdown
  local reply = t.role == "reply"
  local solicited = t.role == "solicited"
  -- Half trips: a reply or solicited data is one crossing after what it answers; a hold found
  -- below adds the peer's ACK crossing and this segment's own on top of that.
  if reply then c.h_target = max(c.h_target, c.h_initiator + 1) end
  if solicited then c.h_initiator = max(c.h_initiator, c.h_at_r2t + 1) end
  if crossing > 0 then
    if solicited or (reply and c.r2ts > 0) then bd.r2t = bd.r2t + ms(crossing)
    else bd.request = bd.request + ms(crossing) end
  end
  local wait_min = max(floor(RULES.wait_min_ms * 1e6 + 0.5), floor(self:full_rtt_ns() / RULES.wait_min_rtt_divisor))
  local loss = min(c.loss_pending_ms, ms(rest))
  if loss > 0 then
    bd.loss = bd.loss + loss
    c.loss_pending_ms = c.loss_pending_ms - loss
    rest = rest - trunc(loss * 1e6)
  end
  if rest > wait_min then
    if not verdict.reported then
      local v = self:classify_hold(dir, seg, ready)
      for k, val in pairs(v) do verdict[k] = val end
      verdict.reported = true
      if verdict.held then
        local fd = { kind = verdict.kind, side = side_of(dir), frame = seg.frame,
                     related = { { "released_by", verdict.release_frame } }, lost_ms = ms(rest),
                     itt = c.itt, command_first_frame = c.first_frame }
        if verdict.acked_frame ~= 0 then fd.related[2] = { "previous_small", verdict.acked_frame } end
        if verdict.kind == "nagle_hold" then
          fd.detail = "sub-MSS segment held until the peer acknowledged the previous one"
        elseif verdict.kind == "rwnd_limited" then
          fd.detail = "sender waited for the receiver's window to open"
        else
          fd.detail = "sender waited for ACKs to grow its congestion window"
        end
        self:emit_finding(fd)
        if verdict.delayed_ack_ms > 0 then
          local da = { kind = "delayed_ack", side = side_of(1 - dir), frame = verdict.release_frame,
                       related = { { "acks", verdict.acked_frame }, { "released", seg.frame } },
                       lost_ms = min(verdict.delayed_ack_ms, ms(rest)), itt = c.itt,
                       command_first_frame = c.first_frame,
                       detail = "ACK sent " .. whole_ms(verdict.delayed_ack_ms) ..
                                " ms late by the delayed-ACK timer while the peer waited" }
          self:emit_finding(da)
        end
      end
    end
    if verdict.held then
      local held_ms = ms(rest)
      local dack = min(verdict.delayed_ack_ms, held_ms)
      bd.delayed_ack = bd.delayed_ack + dack
      if verdict.kind == "nagle_hold" then
        bd.nagle = bd.nagle + held_ms - dack
      else
        bd.window = bd.window + held_ms - dack
      end
      c.hold_ms = c.hold_ms + held_ms
      self:add_kind(c, verdict.kind)
      if dack > 0 then self:add_kind(c, "delayed_ack") end
      -- Two crossings after the data the releasing ACK acknowledged: that ACK's, and this one's
      -- (data of another command says nothing of this one's progress: then on top of it).
      local h = dir == I2T and c.h_initiator or c.h_target
      if verdict.release_h >= 0 and verdict.release_cmd == c.first_frame then
        h = max(h, verdict.release_h + 2)
      else
        h = h + 2
      end
      if dir == I2T then c.h_initiator = h else c.h_target = h end
      rest = 0
    end
  end
  if rest > 0 then
    if dir == T2I and (reply or rest > wait_min) then bd.think = bd.think + ms(rest)
    elseif solicited then bd.r2t = bd.r2t + ms(rest)
    elseif t.response then bd.response = bd.response + ms(rest)
    elseif dir == I2T then bd.request = bd.request + ms(rest)
    elseif c.has_seg[T2I] then bd.data = bd.data + ms(rest)
    else bd.request = bd.request + ms(rest) end
  end
  if reply and c.first_reply_frame == 0 then c.first_reply_frame = seg.frame end
  self.seg_h = dir == I2T and c.h_initiator or c.h_target
  self.seg_cmd = c.first_frame
  self.seg_itt = c.itt
  c.last_event_t = max(c.last_event_t, now)
  c.last_seg_t[dir] = now
  c.has_seg[dir] = true
end

function Connection:classify_hold(dir, seg, ready)
  local v = { held = false, kind = "cwnd_limited", release_frame = 0, release_t = 0,
              delayed_ack_ms = 0, acked_frame = 0, release_h = -1, release_cmd = 0 }
  local f = self.flow[dir]
  if not self.rtt[dir].known then return v end
  local rtt_side = self:rtt_ns(dir)
  local tol = self:tolerance_ns()
  local function released_by(ack_t)
    return math.abs(seg.t - (ack_t + rtt_side)) <= tol and ack_t + rtt_side >= ready
  end
  local len = seg.wire_len
  local small = f.last_small
  if f.has_small and small.acked and small.frame ~= seg.frame and len < f:effective_mss() and
     released_by(small.ack_t) then
    v.held = true
    v.kind = "nagle_hold"
    v.release_frame = small.ack_frame
    v.release_t = small.ack_t
    v.acked_frame = small.frame
    v.release_h, v.release_cmd = small.h or -1, small.cmd or 0
    local ack_delay = small.ack_t - small.t - self:rtt_ns(1 - dir)
    if ms(ack_delay) >= self.opt.delayed_ack_min_ms then v.delayed_ack_ms = ms(ack_delay) end
    return v
  end
  -- Window holds: released by the first ACK that could have reached the sender when this segment
  -- left, not always the latest one captured.
  local a = f.acks
  local i = f.ak_tail + 1
  while i > f.ak_head and a[i - 1].t + rtt_side + tol >= seg.t do i = i - 1 end
  while i <= f.ak_tail and not released_by(a[i].t) do i = i + 1 end
  if i > f.ak_tail then return v end
  local rel = a[i]
  v.held = true
  v.release_frame = rel.frame
  v.release_t = rel.t
  v.release_h, v.release_cmd = rel.h, rel.cmd
  -- The release may itself have been held by the receiver's delayed-ACK timer (an odd segment
  -- at the end of a flight): measured as for Nagle holds.
  local acknowledged_more = i == f.ak_head or rel.ack > a[i - 1].ack  -- not a window update
  if rel.data_frame ~= 0 and acknowledged_more then
    local ack_delay = rel.t - rel.data_t - self:rtt_ns(1 - dir)
    if ms(ack_delay) >= self.opt.delayed_ack_min_ms then
      v.delayed_ack_ms = ms(ack_delay)
      v.acked_frame = rel.data_frame
    end
  end
  -- The edge in force until the release: data that came within a quarter window (at least one
  -- segment) of it means the receiver's window held the sender, not the congestion window.
  local before = i > f.ak_head and a[i - 1] or nil
  if before and f.max_end + max(f:effective_mss(), floor(before.window / RULES.rwnd_edge_window_divisor)) > before.ack + before.window then
    v.kind = "rwnd_limited"
  else
    v.kind = "cwnd_limited"
  end
  return v
end

function Connection:on_pdu_end(dir, seg, ev)
  local b = ev.bhs
  local op = b.opcode
  if ev.digest_bad then self.digest_errors = self.digest_errors + 1 end
  if op == OP.LoginRequest or op == OP.LoginResponse or op == OP.TextRequest or op == OP.TextResponse then
    self:on_login(dir, ev, seg)
    return
  end
  if op == OP.Reject or op == OP.TaskMgmtResponse or op == OP.LogoutResponse then return end
  if b.itt == RESERVED_TAG then return end
  local c = self.by_itt[b.itt]
  if not c then
    -- A reply framed before its command (the initiator's stream still waiting on a digest
    -- probe after a mid-stream start): kept until the command shows up.
    if dir == T2I and not self.replaying and (op == OP.DataIn or op == OP.ScsiResponse or op == OP.R2T) then
      local o = self.orphans
      if #o >= 32 then table.remove(o, 1) end
      local fr, t = seg.frame, seg.t
      if ev.last_frame and ev.last_frame ~= 0 then fr, t = ev.last_frame, ev.last_t end
      o[#o + 1] = { ev = ev, frame = fr, t = t }
    end
    return
  end
  if ev.data_incomplete then c.data_incomplete = true end
  if dir == T2I and not c.has_seg[T2I] and (op == OP.DataIn or op == OP.ScsiResponse or op == OP.R2T) then
    self:touch_late_reply(c, seg, ev)
  end
  local last_t = (ev.last_frame and ev.last_frame ~= 0) and ev.last_t or seg.t
  if op == OP.ScsiCommand then
    c.needed_t = last_t  -- framing may complete later
    if b.data_length > 0 then c.data_out_bytes = c.data_out_bytes + b.data_length end
    if c.unsolicited_expected <= c.data_out_bytes then c.request_done = true end
    self:replay_orphans(b.itt)
  elseif op == OP.DataOut then
    c.data_out_bytes = c.data_out_bytes + b.data_length
    if hasbit(b.flags, 0x80) then
      c.needed_t = last_t
      c.request_done = true
    end
  elseif op == OP.R2T then
    c.r2ts = c.r2ts + 1
    if c.first_r2t_frame == 0 then c.first_r2t_frame = seg.frame end
    c.last_r2t_t = seg.t
    c.h_at_r2t = c.h_target
  elseif op == OP.DataIn then
    c.data_in_bytes = c.data_in_bytes + b.data_length
    if hasbit(b.flags, 0x01) then
      c.scsi_status = b.byte3
      self:complete(c, seg, ev)
    end
  elseif op == OP.ScsiResponse then
    c.iscsi_response = b.byte2
    c.scsi_status = b.byte3
    c.sense_key, c.asc, c.ascq = iscsi_sense(ev.data)
    self:complete(c, seg, ev)
  end
end

-- The reply was framed before (or while) its command was: its time still counts on the critical
-- path, but no hold can be judged on a timeline that has moved on.
function Connection:touch_late_reply(c, seg, ev)
  local none = { held = false, reported = true }
  local response = ev.bhs.opcode == OP.ScsiResponse
  local first, last = seg, seg
  if ev.first_frame and ev.first_frame ~= 0 then first = { frame = ev.first_frame, t = ev.first_t } end
  if ev.last_frame and ev.last_frame ~= 0 then last = { frame = ev.last_frame, t = ev.last_t } end
  self:analyse_touch(T2I, first, { slot = c.slot, role = "reply", response = response }, none)
  if last.t > first.t then
    self:analyse_touch(T2I, last, { slot = c.slot, role = "cont", response = response }, none)
  end
end

-- The command's orphans are taken out first and each is replayed once: one that still finds no
-- open command (a duplicate reply after the status) is dropped, never queued again.
function Connection:replay_orphans(itt)
  local o = self.orphans
  if #o == 0 then return end
  local mine, rest = {}, {}
  for i = 1, #o do
    if o[i].ev.bhs.itt == itt then mine[#mine + 1] = o[i] else rest[#rest + 1] = o[i] end
  end
  if #mine == 0 then return end
  self.orphans = rest
  local outer = self.replaying
  self.replaying = true
  for i = 1, #mine do
    local x = mine[i]
    self:on_pdu_end(T2I, { frame = x.frame, t = x.t, wire_len = 0 }, x.ev)
  end
  self.replaying = outer
end

function Connection:complete(c, seg, ev)
  c.completed = true
  -- The segment with the PDU's last byte (earlier than this one while a digest probe waited).
  if ev.last_frame and ev.last_frame ~= 0 then
    c.status_frame, c.status_t = ev.last_frame, ev.last_t
  else
    c.status_frame, c.status_t = seg.frame, seg.t
  end
  if self.filling and self.filling.t > c.status_t then  -- the status waited for a hole to fill
    c.status_frame, c.status_t = self.filling.frame, self.filling.t
  end
  -- A status captured before its command cannot be timed: it counts as seen with the command.
  c.status_frame = max(c.status_frame, c.first_frame)
  c.status_t = max(c.status_t, c.first_t)
  -- Answered; reported once the initiator acknowledges the status (settle), in status order.
  self:retire(c)
  c.settling = true
  -- Near the initiator a segment lost after the capture point cannot precede the status (the
  -- initiator's stream would have a hole): no need to wait.
  local near_initiator = self.rtt[I2T].known and self.rtt[T2I].known and
                         self:rtt_ns(I2T) * RULES.near_initiator_rtt_factor < self:full_rtt_ns()
  c.settle_seq = near_initiator and 0 or self.flow[T2I].next
  local q = self.settling
  q.tail = q.tail + 1
  q[q.tail] = c
  self:settle(seg.t)
end

local SETTLE_MAX_NS = RULES.settle_max_ms * 1e6  -- without the ACK: reported anyway
function Connection:settle(now, all)
  local q, f = self.settling, self.flow[T2I]
  while q.head <= q.tail do
    local c = q[q.head]
    local acked = c.settle_seq == 0 or (f.una_known and f.una >= c.settle_seq)
    if not all and not acked and now - c.status_t < SETTLE_MAX_NS then break end
    q[q.head] = nil
    q.head = q.head + 1
    self:emit_command(c)
    self:release(c)
  end
end

function Connection:add_kind(c, k)
  if not c.findings_set[k] then
    c.findings_set[k] = true
    c.findings[#c.findings + 1] = k  -- in order of first evidence
  end
end

-- How many commands were in flight together with c, by capture time: framing may lag one
-- direction (a digest probe after a mid-session join) and see commands that followed each
-- other as overlapping.
function Connection:in_flight_with(c)
  if self.outstanding > COUNTED_IN_FLIGHT then return self.outstanding end
  local n = 1
  for _, o in pairs(self.by_itt) do
    if o ~= c and o.used and (not c.completed or o.first_t < c.status_t) then n = n + 1 end
  end
  if self.latest_status_t and self.latest_status_t > c.first_t then n = n + 1 end
  return n
end

function Connection:emit_command(c)
  self.max_outstanding = max(self.max_outstanding, self:in_flight_with(c))
  if c.completed then
    c.latency_ms = ms(c.status_t - c.first_t)
    c.round_trips = max(1, floor((c.h_target + 1) / 2))
    self.completed = self.completed + 1
    if c.write and c.r2ts > 0 and c.bytes <= RULES.r2t_max_write_bytes then
      self:add_kind(c, "r2t_round_trip")
      self:emit_finding({ kind = "r2t_round_trip", side = "target", frame = c.first_r2t_frame,
        lost_ms = c.breakdown.r2t, itt = c.itt, command_first_frame = c.first_frame,
        detail = c.r2ts .. " R2T round trip(s) for a " .. c.bytes .. "-byte write" })
    end
    local think = c.breakdown.think
    if think >= self.opt.think_min_ms and think >= RULES.think_share * c.latency_ms then
      self:add_kind(c, "target_think")
      self:emit_finding({ kind = "target_think", side = "target",
        frame = c.first_reply_frame ~= 0 and c.first_reply_frame or c.status_frame,
        related = { { "command", c.first_frame } }, lost_ms = think, itt = c.itt,
        command_first_frame = c.first_frame,
        detail = "the target took " .. whole_ms(think) .. " ms to answer: the target, not the network" })
    end
    -- The cycle includes the crossing from the previous status to this command (up to
    -- rtt(initiator)): near the target that is where the round trip lies.
    if self.max_outstanding <= 1 then
      local b = c.breakdown
      local back = 0
      if self.latest_status_t and c.first_t > self.latest_status_t then
        back = ms(min(c.first_t - self.latest_status_t, self:rtt_ns(I2T)))
      end
      self.serial_commands = self.serial_commands + 1
      self.serial_cycle_ms = self.serial_cycle_ms + c.latency_ms + back
      local crossings = b.request + b.r2t + b.response + back
      self.serial_wait_ms = self.serial_wait_ms + crossings + b.nagle + b.delayed_ack + b.window
      -- Holds are claimed (and ranked) by their own findings; only the crossings are this one's.
      self.serial_crossing_ms = self.serial_crossing_ms + crossings
    end
    if not self.latest_status_t or c.status_t > self.latest_status_t then self.latest_status_t = c.status_t end
  end
  self.an:on_command(c)
end

function Connection:on_login(dir, ev, seg)
  local b = ev.bhs
  local login = b.opcode == OP.LoginRequest or b.opcode == OP.LoginResponse
  if login then
    self.saw_login = true
    self.isid = string.format("%08x%04x", b.lun_hi, floor(b.lun_lo / 65536))
    if b.opcode == OP.LoginResponse then self.tsih = b.lun_lo % 65536 end
  end
  self.login:add_pdu(b, ev.data, ev.kept_truncated)
  local k = self.login.result
  if not k.complete or self.login_done then return end
  self.login_done = true
  local keys = self.keys
  keys.immediate_data = k.immediate_data
  keys.initial_r2t = k.initial_r2t
  keys.first_burst = k.first_burst
  keys.max_burst = k.max_burst
  keys.target_mrdsl = k.target_mrdsl
  keys.initiator_mrdsl = k.initiator_mrdsl
  keys.max_outstanding_r2t = k.max_outstanding_r2t
  keys.from_login = true
  self.header_digest = k.header_digest == "CRC32C"
  self.data_digest = k.data_digest == "CRC32C"
  -- A corrupt DataSegmentLength (up to 16 MiB) would swallow the stream: bound it by what the
  -- receiver declared, with headroom for later Text renegotiation.
  local bound = max(max(k.max_burst, k.first_burst), 262144)
  self.pdus[I2T].framer:set_digests(self.header_digest, self.data_digest, max(bound, k.target_mrdsl))
  self.pdus[T2I].framer:set_digests(self.header_digest, self.data_digest, max(bound, k.initiator_mrdsl))
  self.initiator_name = k.initiator_name
  self.target_name = k.target_name
  self.session_type = k.session_type
  self:session_id()
end

function Connection:emit_finding(f)
  f.session = self:session_id()
  f.connection = self.id
  self.an:on_finding(f)
end

function Connection:finish()
  for d = 0, 1 do
    local f = self.flow[d]
    if f.ooo_count > 0 then
      self:declare_gap(d, f.max_end, f.ooo[f:ooo_first()].frame)
    end
  end
  for d = 0, 1 do
    local s = { frame = self.flow[d].last_data_frame, t = self.flow[d].last_data_t, wire_len = 0 }
    local events = self.pdus[d]:finish()
    self:on_pdus(d, s, events, false, nil)
  end
  self:settle(0, true)
  for slot = 1, self.slot_count do  -- in slot order, as the engine
    local c = self.slots[slot]
    if c then
      self:emit_command(c)
      self:release(c)
    end
  end
  if self.serial_commands >= RULES.serialized_min_commands and self.max_outstanding <= 1 and
     self.serial_wait_ms >= RULES.serialized_wait_share * self.serial_cycle_ms then
    self:emit_finding({ kind = "serialized", side = "initiator", frame = self.first_command_frame,
      lost_ms = self.serial_crossing_ms,
      detail = self.serial_commands .. " commands issued one at a time; the link sat idle waiting on round trips for " ..
               whole_ms(self.serial_wait_ms) .. " ms (" .. whole_ms(self.serial_crossing_ms) ..
               " ms of it crossing the network)" })
  end
  self:session_id()  -- the engine's connection facts name a session even without a command
end

---------------------------------------------------------------------------------------------
-- Analyzer: the connection table (engine/src/analyzer.cpp) and the results per frame.

local Analyzer = {}
Analyzer.__index = Analyzer

function Analyzer.new(options)
  local a = setmetatable({ options = options or DEFAULT_OPTIONS, live = {}, live_count = 0,
    connections = {}, next_id = 1, sessions = {}, session_keys = {},
    findings = {}, commands = {}, by_evidence = {}, by_decision = {}, by_status = {},
    cmd_by_decision = {},
    cur_frame = 0, finished = false, last_frame = 0,
    pending = {}, pending_count = 0, pending_order = {}, po_head = 1, po_tail = 0,
    closing = {}, cl_head = 1, cl_tail = 0, last_idle_scan = nil, refused = {}, refused_count = 0,
    segments = 0, scan_segments = 0 }, Analyzer)
  return a
end

-- Memory follows what is open: a closed connection is finished once its last segments (final
-- ACK, a resent FIN) have had time to pass (engine/src/analyzer.cpp).
function Analyzer:finish_closed(now)
  while self.cl_head <= self.cl_tail and self.closing[self.cl_head].due < now do
    local e = self.closing[self.cl_head]
    self.closing[self.cl_head] = nil
    self.cl_head = self.cl_head + 1
    local c = self.live[e.key]
    if c and c.id == e.id then
      c:finish()
      self.live[e.key] = nil
      self.live_count = self.live_count - 1
    end
  end
end

-- At the connection cap: connections idle past the timeout are finished (one scan per half timeout).
function Analyzer:finish_idle(now)
  local timeout = self.options.idle_timeout_s * 1e9
  if self.last_idle_scan and (now - self.last_idle_scan < timeout / 2 or
     self.segments - self.scan_segments < self.live_count) then return end
  self.last_idle_scan = now
  self.scan_segments = self.segments
  local idle = {}
  for key, c in pairs(self.live) do
    if now - c.last_t >= timeout then idle[#idle + 1] = { id = c.id, key = key } end
  end
  table.sort(idle, function(a, b) return a.id < b.id end)
  for _, e in ipairs(idle) do
    self.live[e.key]:finish()
    self.live[e.key] = nil
    self.live_count = self.live_count - 1
  end
end

-- Handshakes on ports not known to be iSCSI, kept until a Login Request shows the connection is
-- (then replayed into it: MSS, window scale and round trips come from them).
local MAX_PENDING_HANDSHAKES = 4096
function Analyzer:remember_handshake(key, seg, syn)
  local p = self.pending[key]
  if syn then
    if not p then
      while self.pending_count >= MAX_PENDING_HANDSHAKES and self.po_head <= self.po_tail do
        local old = self.pending_order[self.po_head]
        self.pending_order[self.po_head] = nil
        self.po_head = self.po_head + 1
        if self.pending[old] then
          self.pending[old] = nil
          self.pending_count = self.pending_count - 1
        end
      end
      if self.po_tail - self.po_head + 1 >= 2 * MAX_PENDING_HANDSHAKES then  -- drop replayed keys
        local order, n = {}, 0
        for k = self.po_head, self.po_tail do
          local x = self.pending_order[k]
          if self.pending[x] then n = n + 1; order[n] = x end
        end
        self.pending_order, self.po_head, self.po_tail = order, 1, n
      end
      self.pending_count = self.pending_count + 1
      self.po_tail = self.po_tail + 1
      self.pending_order[self.po_tail] = key
    end
    p = {}
    self.pending[key] = p
  elseif not p or #p >= 3 then
    return
  end
  local copy = {}
  for k, v in pairs(seg) do copy[k] = v end
  copy.payload = ""
  p[#p + 1] = copy
end

function Analyzer:resolve_session(key, conn)
  local id = self.session_keys[key]
  if not id then
    id = #self.sessions + 1
    self.session_keys[key] = id
    self.sessions[id] = { id = id, connections = {}, initiator = conn.initiator, target = conn.target }
  end
  local s = self.sessions[id]
  s.connections[#s.connections + 1] = conn.id
  if conn.login_done then
    s.initiator_name, s.target_name = conn.initiator_name, conn.target_name
    s.session_type, s.isid, s.tsih = conn.session_type, conn.isid, conn.tsih
  end
  return id
end

local function push(t, k, v)
  local l = t[k]
  if not l then l = {}; t[k] = l end
  l[#l + 1] = v
end

function Analyzer:on_finding(f)
  f.decided_frame = self.cur_frame
  f.fix = fix_for(f.kind, f.side)
  self.findings[#self.findings + 1] = f
  push(self.by_evidence, f.frame, f)
  push(self.by_decision, self.cur_frame, f)
end

function Analyzer:on_command_start(c) end

function Analyzer:on_command(c)
  self.commands[#self.commands + 1] = c
  if c.completed then
    push(self.by_status, c.status_frame, c)
    push(self.cmd_by_decision, self.cur_frame, c)
  end
end

-- The engine orders its connection table by (lower endpoint, higher endpoint), an endpoint by
-- its 16 address bytes (IPv4 in the first 4), then IPv6 or not, then port; finish() goes
-- through it in that order. As a string of hex digits that sorts the same way.
local function endpoint_order(ep)
  local addr, port = ep:match("^%[?(.-)%]?:(%d+)$")
  if not addr then return ep end
  local bytes, v6 = {}, addr:find(":", 1, true) ~= nil
  local v4 = addr:match("(%d+%.%d+%.%d+%.%d+)$")
  local tail = {}
  if v4 then
    for n in v4:gmatch("%d+") do tail[#tail + 1] = tonumber(n) % 256 end
    addr = addr:sub(1, #addr - #v4)
  end
  if v6 then
    local head, rest = addr, nil
    local dc = addr:find("::", 1, true)
    if dc then head, rest = addr:sub(1, dc - 1), addr:sub(dc + 2) end
    local function groups(s)
      local g = {}
      for h in s:gmatch("[^:]+") do g[#g + 1] = tonumber(h, 16) or 0 end
      return g
    end
    local hg, rg = groups(head), rest and groups(rest) or {}
    local n = #hg + #rg + #tail / 2
    for _, v in ipairs(hg) do bytes[#bytes + 1] = floor(v / 256); bytes[#bytes + 1] = v % 256 end
    for _ = n + 1, 8 do bytes[#bytes + 1] = 0; bytes[#bytes + 1] = 0 end
    for _, v in ipairs(rg) do bytes[#bytes + 1] = floor(v / 256); bytes[#bytes + 1] = v % 256 end
  end
  for _, v in ipairs(tail) do bytes[#bytes + 1] = v end
  local out = {}
  for i = 1, 16 do out[i] = string.format("%02x", bytes[i] or 0) end
  return table.concat(out) .. (v6 and "1" or "0") .. string.format("%04x", tonumber(port) % 65536)
end

local function looks_like_login(payload)
  if #payload < 48 or payload:byte(1) ~= 0x43 then return false end
  return plausible(parse_bhs(payload), true, true)
end

-- seg: frame, t (ns, any origin), src, dst (endpoint strings), sport, dport, seq, ack, flags,
-- window, mss, wscale, payload (captured bytes), wire_len
function Analyzer:feed(seg)
  self.cur_frame = seg.frame
  self.last_frame = max(self.last_frame, seg.frame)
  local key = seg.src < seg.dst and (seg.src .. "|" .. seg.dst) or (seg.dst .. "|" .. seg.src)
  self.segments = self.segments + 1
  if self.cl_head <= self.cl_tail then self:finish_closed(seg.t) end
  local c = self.live[key]
  local syn = hasbit(seg.flags, 0x02) and not hasbit(seg.flags, 0x10)
  if c and syn and c.closed then
    c:finish()
    self.live[key] = nil
    self.live_count = self.live_count - 1
    c = nil
  end
  if not c then
    local opt = self.options
    if not opt.ports[seg.dport] and not opt.ports[seg.sport] and opt.detect_ports and seg.wire_len == 0 and
       (hasbit(seg.flags, 0x02) or hasbit(seg.flags, 0x10)) then
      self:remember_handshake(key, seg, syn)
    end
    if not syn and seg.wire_len == 0 then return end
    -- A connection the cap refused stays unanalysed until its 4-tuple starts anew (SYN).
    if self.refused[key] then
      if not syn then return end
      self.refused[key] = nil
      self.refused_count = self.refused_count - 1
    end
    local ini, tgt
    if opt.ports[seg.dport] then ini, tgt = seg.src, seg.dst
    elseif opt.ports[seg.sport] then ini, tgt = seg.dst, seg.src
    elseif opt.detect_ports and not syn and looks_like_login(seg.payload) then ini, tgt = seg.src, seg.dst end
    if not ini then return end
    if self.live_count >= opt.max_connections then self:finish_idle(seg.t) end
    if self.live_count >= opt.max_connections then
      if self.refused_count >= 65536 then self.refused, self.refused_count = {}, 0 end
      self.refused[key] = true
      self.refused_count = self.refused_count + 1
      return
    end
    c = Connection.new(self, self.next_id, ini, tgt)
    local a, b = endpoint_order(ini), endpoint_order(tgt)
    c.table_order = a < b and (a .. b) or (b .. a)
    self.next_id = self.next_id + 1
    self.live[key] = c
    self.live_count = self.live_count + 1
    self.connections[#self.connections + 1] = c
    local p = self.pending[key]
    if p then
      for _, h in ipairs(p) do c:on_segment(h, h.src == ini and I2T or T2I) end
      self.pending[key] = nil
      self.pending_count = self.pending_count - 1
    end
  end
  local dir = seg.src == c.initiator and I2T or T2I
  local was_closed = c.closed
  c:on_segment(seg, dir)
  if c.closed and not was_closed then
    self.cl_tail = self.cl_tail + 1
    self.closing[self.cl_tail] = { due = seg.t + max(RULES.closed_linger_ms * 1e6, RULES.closed_linger_rtts * c:full_rtt_ns()), key = key, id = c.id }
  end
end

function Analyzer:finish()
  if self.finished then return end
  self.finished = true
  self.cur_frame = self.last_frame
  local list = {}
  for _, c in pairs(self.live) do list[#list + 1] = c end
  table.sort(list, function(a, b) return a.table_order < b.table_order end)
  for _, c in ipairs(list) do c:finish() end
end

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
    table.sort(order, function(a, b) return a.lost > b.lost end)
    if #order == 0 then p("  no findings") end
    for _, k in ipairs(order) do
      local ex = {}
      for i = 1, min(5, #k.frames) do ex[i] = tostring(k.frames[i]) end
      p(string.format("  %s (%s): %d occurrence(s), %s ms lost; frames %s", k.kind, k.side, k.n,
        fmt_ms(k.lost), table.concat(ex, ", ")))
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
               UNSUPPORTED_KINDS = UNSUPPORTED_KINDS, fix_for = fix_for, VERSION = VERSION }

---------------------------------------------------------------------------------------------
-- Wireshark glue

if not rawget(_G, "Proto") then
  return core  -- loaded outside Wireshark (plain Lua): the analysis core only
end

local proto = Proto("iscsi_doctor_lua", "iSCSI Doctor (Lua)")
-- One vocabulary with the C plugin (dissector/README.md "Fields"): the same names, types and
-- meanings under iscsi_doctor_lua. as under iscsi_doctor. (tests/lua compares the two).
local pf = {
  command = ProtoField.none("iscsi_doctor_lua.command", "Command"),
  itt = ProtoField.uint32("iscsi_doctor_lua.itt", "ITT", base.HEX),
  op = ProtoField.string("iscsi_doctor_lua.op", "Operation"),
  session = ProtoField.uint32("iscsi_doctor_lua.session", "Session"),
  connection = ProtoField.uint32("iscsi_doctor_lua.connection", "Connection"),
  first_frame = ProtoField.framenum("iscsi_doctor_lua.first_frame", "Command's first frame"),
  status_frame = ProtoField.framenum("iscsi_doctor_lua.status_frame", "Status frame"),
  command_frame = ProtoField.framenum("iscsi_doctor_lua.command_frame", "Command"),
  round_trips = ProtoField.int32("iscsi_doctor_lua.round_trips", "Round trips"),
  ideal_round_trips = ProtoField.int32("iscsi_doctor_lua.ideal_round_trips", "Ideal round trips"),
  excess_round_trips = ProtoField.int32("iscsi_doctor_lua.excess_round_trips", "Excess round trips"),
  latency_ms = ProtoField.double("iscsi_doctor_lua.latency_ms", "Latency (ms)"),
  lba = ProtoField.uint64("iscsi_doctor_lua.lba", "LBA"),
  bytes = ProtoField.uint32("iscsi_doctor_lua.bytes", "Bytes"),
  scsi_status = ProtoField.uint8("iscsi_doctor_lua.scsi_status", "SCSI status", base.HEX),
  command_finding = ProtoField.string("iscsi_doctor_lua.command_finding", "Command finding"),
  breakdown = ProtoField.none("iscsi_doctor_lua.breakdown", "Breakdown"),
  finding_tree = ProtoField.none("iscsi_doctor_lua.finding_tree", "Finding"),
  finding = ProtoField.string("iscsi_doctor_lua.finding", "Finding"),
  side = ProtoField.string("iscsi_doctor_lua.side", "Side"),
  lost_ms = ProtoField.double("iscsi_doctor_lua.lost_ms", "Time lost (ms)"),
  fix = ProtoField.string("iscsi_doctor_lua.fix", "Fix"),
  detail = ProtoField.string("iscsi_doctor_lua.detail", "Detail"),
  evidence_frame = ProtoField.framenum("iscsi_doctor_lua.evidence_frame", "Evidence frame"),
  finding_itt = ProtoField.uint32("iscsi_doctor_lua.finding_itt", "Delayed command ITT", base.HEX),
  command_first_frame = ProtoField.framenum("iscsi_doctor_lua.command_first_frame",
                                            "Delayed command's first frame"),
  related_frame = ProtoField.framenum("iscsi_doctor_lua.related_frame", "Related frame"),
}
-- Related frames by their role (the engine's names), as the C plugin's fields.
local RELATED = { released_by = "Released by", acks = "Acknowledges", released = "Released",
                  previous_small = "Previous small segment", original = "Original" }
for role, title in pairs(RELATED) do
  pf["rel_" .. role] = ProtoField.framenum("iscsi_doctor_lua." .. role, title)
end
-- Latency breakdown of a command (docs/rules.md "Latency breakdown"): the parts add up.
local BREAKDOWN = { "request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss",
                    "response" }
local BREAKDOWN_TITLE = { request = "Request", think = "Target think", data = "Data", nagle = "Nagle",
                          delayed_ack = "Delayed ACK", r2t = "R2T", window = "Window", loss = "Loss",
                          response = "Response" }
for _, part in ipairs(BREAKDOWN) do
  pf["bd_" .. part] = ProtoField.double("iscsi_doctor_lua.breakdown." .. part .. "_ms",
                                        BREAKDOWN_TITLE[part] .. " (ms)")
end
local all_fields = {}
for _, v in pairs(pf) do all_fields[#all_fields + 1] = v end
proto.fields = all_fields

-- One expert field per finding kind, as the C plugin's: Warning for the network holds and losses,
-- Note for what is a protocol or target choice.
local NOTE_KINDS = { r2t_round_trip = true, target_think = true, serialized = true }
local ef = {
  slow = ProtoExpert.new("iscsi_doctor_lua.expert.excess_round_trips",
                         "Command needed more round trips than ideal", expert.group.SEQUENCE, expert.severity.NOTE),
}
local experts = { ef.slow }
for _, kind in ipairs(FINDING_KINDS) do
  ef[kind] = ProtoExpert.new("iscsi_doctor_lua.expert." .. kind, "iscsi-doctor finding: " .. kind,
                             expert.group.SEQUENCE, NOTE_KINDS[kind] and expert.severity.NOTE or expert.severity.WARN)
  experts[#experts + 1] = ef[kind]
end
proto.experts = experts

proto.prefs.ports = Pref.string("iSCSI target ports", "3260", "Comma-separated TCP ports of iSCSI targets")
proto.prefs.detect_ports = Pref.bool("Detect iSCSI on other ports", true,
  "Follow connections on other ports that start with a Login Request")
proto.prefs.report = Pref.bool("Print report at the end (tshark)", false,
  "Print the text report when tshark finishes (as the Tools menu window shows it)")

local F = {}
local function fld(name)
  local ok, f = pcall(Field.new, name)
  if ok then F[name] = f end
end
for _, n in ipairs({ "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport",
  "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.window_size_value",
  "tcp.options.mss_val", "tcp.options.wscale.shift", "tcp.len", "tcp.hdr_len", "tcp.payload",
  "tcp.segment_data" }) do
  fld(n)
end

local state = nil
local base_secs = nil

local function options_from_prefs()
  local o = {}
  for k, v in pairs(DEFAULT_OPTIONS) do o[k] = v end
  o.ports = {}
  for n in tostring(proto.prefs.ports or "3260"):gmatch("%d+") do o.ports[tonumber(n)] = true end
  o.detect_ports = proto.prefs.detect_ports
  return o
end

function proto.init()
  state = Analyzer.new(options_from_prefs())
  base_secs = nil
end

local function first(name)
  local f = F[name]
  if not f then return nil end
  local v = f()
  return v
end

local function feed_frame(pinfo)
  local len_fi = first("tcp.len")
  if not len_fi then return end
  local srcport, dstport = first("tcp.srcport"), first("tcp.dstport")
  local seq, ack = first("tcp.seq_raw"), first("tcp.ack_raw")
  local flags = first("tcp.flags")
  if not (srcport and dstport and seq and flags) then return end
  local src, dst = first("ip.src"), first("ip.dst")
  if not src then src, dst = first("ipv6.src"), first("ipv6.dst") end
  if not src or not dst then return end
  local te = first("frame.time_epoch").value
  if not base_secs then base_secs = te.secs end
  local t = (te.secs - base_secs) * 1e9 + te.nsecs
  local payload = ""
  local wire_len = len_fi.value
  if wire_len > 0 then
    local pl = first("tcp.payload")
    if pl then
      local ok, raw = pcall(function() return pl.range:raw() end)
      if ok and raw then payload = raw else payload = tostring(pl.value):gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end) end
    end
  end
  local mss, ws = first("tcp.options.mss_val"), first("tcp.options.wscale.shift")
  local hl = first("tcp.hdr_len")
  local options_len = hl and max(0, hl.value - 20) or 0
  local sp, dp = srcport.value, dstport.value
  state:feed({ frame = pinfo.number, t = t, src = tostring(src.value) .. ":" .. sp,
    dst = tostring(dst.value) .. ":" .. dp, sport = sp, dport = dp, seq = seq.value,
    ack = ack and ack.value or 0, flags = flags.value % 256,
    window = (first("tcp.window_size_value") or { value = 0 }).value,
    mss = mss and mss.value or 0, wscale = ws and ws.value or -1, options_len = options_len,
    payload = payload, wire_len = wire_len })
end

-- A decimal string (the core keeps 64-bit LBAs exact as text) as a UInt64.
local function uint64_of(dec)
  local hi, lo = 0, 0
  for d in tostring(dec):gmatch("%d") do
    local l = lo * 10 + tonumber(d)
    lo = l % 4294967296
    hi = (hi * 10 + math.floor(l / 4294967296)) % 4294967296
  end
  return UInt64.new(lo, hi)
end

local function add_command(root, c)
  local t = root:add(pf.command):set_text(string.format(
    "Command ITT 0x%08x %s: %d round trip(s) (ideal %d), %.3f ms", c.itt, c.op or "?", c.round_trips,
    c.ideal_round_trips, c.latency_ms))
  t:add(pf.itt, c.itt)
  t:add(pf.op, c.op or "?")
  if c.session then t:add(pf.session, c.session) end
  if c.conn then t:add(pf.connection, c.conn.id) end
  t:add(pf.first_frame, c.first_frame)
  t:add(pf.command_frame, c.first_frame)
  t:add(pf.status_frame, c.status_frame)
  t:add(pf.round_trips, c.round_trips)
  t:add(pf.ideal_round_trips, c.ideal_round_trips)
  t:add(pf.excess_round_trips, c.round_trips - c.ideal_round_trips)
  t:add(pf.latency_ms, c.latency_ms)
  if c.lba then t:add(pf.lba, uint64_of(c.lba)) end
  if c.bytes then t:add(pf.bytes, c.bytes) end
  if c.scsi_status then t:add(pf.scsi_status, c.scsi_status) end
  for _, k in ipairs(c.findings) do t:add(pf.command_finding, k) end
  local bt = t:add(pf.breakdown):set_text("Latency breakdown")
  for _, part in ipairs(BREAKDOWN) do bt:add(pf["bd_" .. part], c.breakdown[part] or 0) end
  if #c.findings > 0 then t:append_text(" [" .. table.concat(c.findings, ", ") .. "]") end
  if c.round_trips > c.ideal_round_trips then
    t:add_proto_expert_info(ef.slow, string.format("%d round trips where %d would do",
      c.round_trips, c.ideal_round_trips))
  end
end

local function add_finding(root, f)
  local t = root:add(pf.finding_tree):set_text(string.format("Finding: %s (%s), %.3f ms lost", f.kind, f.side,
                                                             f.lost_ms or 0))
  local kind_item = t:add(pf.finding, f.kind)
  t:add(pf.side, f.side)
  t:add(pf.lost_ms, f.lost_ms or 0)
  t:add(pf.fix, f.fix)
  if f.detail then t:add(pf.detail, f.detail) end
  if f.session then t:add(pf.session, f.session) end
  if f.connection then t:add(pf.connection, f.connection) end
  t:add(pf.evidence_frame, f.frame)
  if f.itt then t:add(pf.finding_itt, f.itt) end
  if f.command_first_frame and f.command_first_frame ~= 0 then
    t:add(pf.command_first_frame, f.command_first_frame)
    t:add(pf.command_frame, f.command_first_frame)
  end
  if f.related then
    for _, r in ipairs(f.related) do
      if r[2] ~= 0 then
        t:add(pf.related_frame, r[2]):append_text(" (" .. r[1] .. ")")
        if pf["rel_" .. r[1]] then t:add(pf["rel_" .. r[1]], r[2]) end
      end
    end
  end
  -- One message per kind and side, so the Expert Information dialog groups them (as the C plugin).
  kind_item:add_proto_expert_info(ef[f.kind] or ef.slow, f.kind .. " (" .. f.side .. " side); fix: " .. f.fix)
end

function proto.dissector(tvb, pinfo, tree)
  if not state then proto.init() end
  local n = pinfo.number
  local findings, cmds
  -- tshark -2 without -R/-Y runs its first pass without a tree (no field values): then the
  -- second pass is the one that analyses.
  if not pinfo.visited and first("frame.time_epoch") then state.first_pass_seen = true end
  if not pinfo.visited or not state.first_pass_seen then
    -- The pass that builds the state, once, in frame order; a frame shows what it decided, and
    -- the evidence_frame/status_frame fields say where (the evidence may be earlier).
    if n > state.last_frame then feed_frame(pinfo) end
    findings, cmds = state.by_decision[n], state.cmd_by_decision[n]
  else
    state:finish()  -- the first pass is over: results on their evidence and status frames
    findings, cmds = state.by_evidence[n], state.by_status[n]
  end
  if not cmds and not findings then return end
  -- A protocol root node, as the C plugin's, with the commands and findings under it.
  local root = tree:add(proto)
  if cmds then for _, c in ipairs(cmds) do add_command(root, c) end end
  if findings then for _, f in ipairs(findings) do add_finding(root, f) end end
end

register_postdissector(proto)

-- End of a tshark run: finish (serialized queue, open commands) and print the report if asked.
local tap = Listener.new("frame", nil)
function tap.draw()
  if not state then return end
  state:finish()
  if proto.prefs.report and not gui_enabled() then print(state:report()) end
end

if gui_enabled() then
  local function show_report()
    local w = TextWindow.new("iSCSI Doctor (Lua)")
    if not state then w:set("No capture analysed yet.") return end
    state:finish()
    w:set(state:report())
  end
  register_menu("iSCSI Doctor (Lua)/Report", show_report, MENU_TOOLS_UNSORTED)
end

return core
