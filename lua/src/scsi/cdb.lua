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

-- The LUN as a number (Bhs::lun_number, SAM-5 §4.6): single-level peripheral or flat-space
-- addressing gives its 14-bit number; anything else the 8 bytes as a decimal string.
local function lun_number(hi, lo)
  local method = floor(hi / 1073741824)
  if (method == 0 or method == 1) and hi % 65536 == 0 and lo == 0 then return floor(hi / 65536) % 16384 end
  local function bytes4(v) return string.char(floor(v / 16777216) % 256, floor(v / 65536) % 256, floor(v / 256) % 256, v % 256) end
  return be64_decimal(bytes4(hi) .. bytes4(lo), 1)
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
