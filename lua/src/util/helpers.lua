---------------------------------------------------------------------------------------------
-- Small helpers

-- Globals read in the analysis as locals: Wireshark's global table holds hundreds of names, so
-- each global read is a lookup in a large hash table.
local ipairs, pairs, setmetatable, tonumber, tostring = ipairs, pairs, setmetatable, tonumber, tostring
local string, table, math = string, table, math
local floor = math.floor
local function min(a, b) if a < b then return a end return b end
local function max(a, b) if a > b then return a end return b end
local function ms(ns) return ns / 1e6 end
local function trunc(x) if x >= 0 then return floor(x) end return -floor(-x) end
-- Rounded milliseconds for messages, as the engine's whole_ms (int64(v + 0.5): toward zero).
-- Rounded to the microsecond first, as the engine: sums in another order differ in the last bits.
local function whole_ms(v) return string.format("%.0f", trunc(math.floor(v * 1000 + 0.5) / 1000 + 0.5)) end
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
