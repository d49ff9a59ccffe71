-- SPDX-License-Identifier: GPL-2.0-or-later
--
-- Runs the Lua plugin's analysis core without Wireshark, under any Lua 5.1-5.4 interpreter, on
-- an uncompressed little- or big-endian pcap file (Ethernet, Linux cooked, raw IP), and prints
-- the plugin's text report. tests/lua uses it to check that the core gives the CLI's verdicts
-- under every Lua version Wireshark builds ship with (5.1 up to 4.2, 5.4 from 4.4).
--
--   lua5.x tests/lua/run_core.lua lua/iscsi_doctor.lua capture.pcap

local plugin, path = arg[1], arg[2]
local core = dofile(plugin)
local f = assert(io.open(path, "rb"))
local data = f:read("*a")
f:close()

local function u8(s, p) return s:byte(p) end
local function be16(s, p) local a, b = s:byte(p, p + 1); return a * 256 + b end
local function be32(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function le32(s, p)
  local a, b, c, d = s:byte(p, p + 3)
  return ((d * 256 + c) * 256 + b) * 256 + a
end

local magic = be32(data, 1)
local r32, nano
if magic == 0xa1b2c3d4 or magic == 0xa1b23c4d then r32 = be32
else r32 = le32; magic = le32(data, 1) end
nano = magic == 0xa1b23c4d
assert(magic == 0xa1b2c3d4 or magic == 0xa1b23c4d, "not a pcap file")
local linktype = r32(data, 21) % 65536

local an = core.Analyzer.new()
local pos, frame, base = 25, 0, nil

local function ipv4(s, p) return string.format("%d.%d.%d.%d", s:byte(p, p + 3)) end
local function ipv6(s, p)
  local t = {}
  for i = 0, 7 do t[#t + 1] = string.format("%x", be16(s, p + 2 * i)) end
  return table.concat(t, ":")
end

local function tcp(pkt, p, ip_end, src, dst, t)
  if ip_end - p < 20 then return end
  local sport, dport = be16(pkt, p), be16(pkt, p + 2)
  local seq, ack = be32(pkt, p + 4), be32(pkt, p + 8)
  local hl = math.floor(u8(pkt, p + 12) / 16) * 4
  local flags = u8(pkt, p + 13)
  local win = be16(pkt, p + 14)
  local mss, ws = 0, -1
  local o, oe = p + 20, math.min(p + hl, #pkt + 1)
  while o < oe do
    local kind = u8(pkt, o)
    if kind == 0 then break end
    if kind == 1 then o = o + 1 else
      local len = u8(pkt, o + 1) or 0
      if len < 2 then break end
      if kind == 2 and len == 4 then mss = be16(pkt, o + 2) end
      if kind == 3 and len == 3 then ws = u8(pkt, o + 2) end
      o = o + len
    end
  end
  local wire_len = ip_end - (p + hl)
  if wire_len < 0 then return end
  local payload = pkt:sub(p + hl, math.min(ip_end, #pkt + 1) - 1)
  an:feed({ frame = frame, t = t, src = src .. ":" .. sport, dst = dst .. ":" .. dport,
    sport = sport, dport = dport, seq = seq, ack = ack, flags = flags, window = win, mss = mss,
    wscale = ws, options_len = hl - 20, payload = payload, wire_len = wire_len })
end

local function ip(pkt, p, t)
  local v = math.floor(u8(pkt, p) / 16)
  if v == 4 then
    local ihl = (u8(pkt, p) % 16) * 4
    if u8(pkt, p + 9) ~= 6 then return end
    local frag = be16(pkt, p + 6) % 8192
    if frag ~= 0 then return end
    local ip_end = p + be16(pkt, p + 2)
    tcp(pkt, p + ihl, ip_end, ipv4(pkt, p + 12), ipv4(pkt, p + 16), t)
  elseif v == 6 then
    if u8(pkt, p + 6) ~= 6 then return end  -- no extension headers
    local ip_end = p + 40 + be16(pkt, p + 4)
    tcp(pkt, p + 40, ip_end, "[" .. ipv6(pkt, p + 8) .. "]", "[" .. ipv6(pkt, p + 24) .. "]", t)
  end
end

while pos + 16 <= #data do
  local sec, frac, incl = r32(data, pos), r32(data, pos + 4), r32(data, pos + 8)
  local pkt = data:sub(pos + 16, pos + 15 + incl)
  pos = pos + 16 + incl
  frame = frame + 1
  if not base then base = sec end
  local t = (sec - base) * 1e9 + (nano and frac or frac * 1000)
  local p, etype
  if linktype == 1 then
    p, etype = 15, be16(pkt, 13)
    while etype == 0x8100 or etype == 0x88a8 do etype = be16(pkt, p + 2); p = p + 4 end
  elseif linktype == 113 then
    p, etype = 17, be16(pkt, 15)
  elseif linktype == 101 or linktype == 12 or linktype == 14 then
    p, etype = 1, (math.floor(u8(pkt, 1) / 16) == 6) and 0x86dd or 0x0800
  end
  if p and (etype == 0x0800 or etype == 0x86dd) and #pkt >= p + 20 then ip(pkt, p, t) end
end
an:finish()
print(an:report())
