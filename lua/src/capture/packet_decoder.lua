---------------------------------------------------------------------------------------------
-- Frames to TCP segments (ports engine/src/net/packet_decoder.cpp): link layer -> (VLAN, MPLS, PPPoE) ->
-- IPv4/IPv6 -> TCP, read from the frame's bytes. The Wireshark glue reads every frame this way
-- (a field extractor would make Wireshark build a protocol tree for every frame, which cost more
-- than the whole analysis); tests/lua/run_core.lua reads pcap files with it.
--
-- Positions are 1-based into the frame string `pkt`; `n` is its last captured byte and `extra`
-- the bytes the wire had beyond it (snaplen). As in the CLI, the payload is cut at the IP
-- datagram's end (Ethernet padding is not payload), a zero IPv4 total length or IPv6 payload
-- length (TSO/GSO, jumbograms) means "as long as the frame", and fragments are not decoded.

local PacketDecoder
-- A segment's captured payload as a string (the decoder leaves it in the frame's string).
local function payload_of(seg)
  local n = seg.pay_len
  if n == 0 then return "" end
  return string.sub(seg.pkt, seg.pay, seg.pay + n - 1)
end
do
  local byte, sub, fmt, concat = string.byte, string.sub, string.format, table.concat
  local MAX_NESTING = 8  -- VLAN tags, MPLS labels, IPv6 extension headers
  local HEADER_LEN = {}  -- TCP header length by the data offset byte (a lookup, not a call)
  for b = 0, 255 do HEADER_LEN[b] = floor(b / 16) * 4 end

  -- Endpoint names as the engine writes them ("10.0.0.1:3260", "[2001:db8::1]:3260") and the
  -- analyzer's connection key, cached by the addresses' bytes and the ports: two table lookups
  -- per frame instead of string building. Emptied past FLOWS_MAX, so memory stays bounded.
  local FLOWS_MAX = 65536
  local flows, flow_count = {}, 0
  local function ipv6_text(pkt, p)
    local g = {}
    for i = 0, 7 do g[i + 1] = be16(pkt, p + 2 * i) end
    local best, best_len, i = -1, 0, 1  -- RFC 5952: the longest run of 2+ zero groups compressed
    while i <= 8 do
      local j = i
      while j <= 8 and g[j] == 0 do j = j + 1 end
      if j - i > best_len and j - i > 1 then best, best_len = i, j - i end
      i = (j == i) and i + 1 or j
    end
    local out = {}
    i = 1
    while i <= 8 do
      if i == best then
        out[#out + 1] = "::"
        i = i + best_len
      else
        if #out > 0 and out[#out] ~= "::" then out[#out + 1] = ":" end
        out[#out + 1] = fmt("%x", g[i])
        i = i + 1
      end
    end
    return "[" .. concat(out) .. "]"
  end
  -- Sets seg.src, seg.dst and seg.key for the addresses at p (source) and p + len (destination).
  local function name_flow(pkt, p, len, seg)
    local addrs = sub(pkt, p, p + 2 * len - 1)
    local by_ports = flows[addrs]
    if not by_ports then
      if flow_count >= FLOWS_MAX then flows, flow_count = {}, 0 end
      by_ports = {}
      flows[addrs] = by_ports
    end
    local ports = seg.sport * 65536 + seg.dport
    local f = by_ports[ports]
    if not f then
      local src, dst
      if len == 4 then
        src, dst = fmt("%d.%d.%d.%d", byte(pkt, p, p + 3)), fmt("%d.%d.%d.%d", byte(pkt, p + 4, p + 7))
      else
        src, dst = ipv6_text(pkt, p), ipv6_text(pkt, p + 16)
      end
      src, dst = src .. ":" .. seg.sport, dst .. ":" .. seg.dport
      f = { src, dst, src < dst and (src .. "|" .. dst) or (dst .. "|" .. src) }
      by_ports[ports] = f
      flow_count = flow_count + 1
    end
    seg.src, seg.dst, seg.key = f[1], f[2], f[3]
  end

  -- TCP from p; cap_end is one past its last captured byte, wire_len its length according to IP.
  -- Every key of seg but frame, t and the names (src, dst, key) is set.
  local function decode_tcp(pkt, p, cap_end, wire_len, seg)
    if cap_end - p < 20 then return false end
    local sp1, sp2, dp1, dp2, s1, s2, s3, s4, a1, a2, a3, a4, off, fl, w1, w2 = byte(pkt, p, p + 15)
    local hl = HEADER_LEN[off]
    if hl < 20 or hl > wire_len then return false end
    local flags = fl % 64  -- FIN..URG; ECE/CWR are not part of the engine's flag set
    local mss, ws, sl, sr, ts, tv, te = 0, -1, 0, 0, false, 0, 0
    local syn = flags % 4 >= 2
    -- MSS and window scale mean something on a SYN only; the first SACK block anywhere. Options of
    -- NOP, NOP, timestamps alone (most segments) hold neither.
    local options = hl > 20
    if hl == 32 and not syn then
      local o1, o2, o3, o4, v1, v2, v3, v4, e1, e2, e3, e4 = byte(pkt, p + 20, p + 31)
      options = o1 ~= 1 or o2 ~= 1 or o3 ~= 8
      if not options and o4 == 10 and cap_end >= p + 32 then
        ts, tv, te = true, ((v1 * 256 + v2) * 256 + v3) * 256 + v4, ((e1 * 256 + e2) * 256 + e3) * 256 + e4
      end
    end
    if options then
      local o, oe = p + 20, min(p + hl, cap_end)
      while o < oe do
        local kind = byte(pkt, o)
        if kind == 0 then break end
        if kind == 1 then o = o + 1 else
          if o + 1 >= oe then break end
          local len = byte(pkt, o + 1)
          if len < 2 or o + len > oe then break end
          if syn and kind == 2 and len == 4 then mss = be16(pkt, o + 2) end
          if syn and kind == 3 and len == 3 then ws = min(byte(pkt, o + 2), 14) end
          if kind == 5 and len >= 10 and sl == sr then sl, sr = be32(pkt, o + 2), be32(pkt, o + 6) end
          if kind == 8 and len == 10 then ts, tv, te = true, be32(pkt, o + 2), be32(pkt, o + 6) end
          o = o + len
        end
      end
    end
    seg.sport, seg.dport = sp1 * 256 + sp2, dp1 * 256 + dp2
    seg.seq = ((s1 * 256 + s2) * 256 + s3) * 256 + s4
    seg.ack = ((a1 * 256 + a2) * 256 + a3) * 256 + a4
    seg.flags, seg.window = flags, w1 * 256 + w2
    seg.mss, seg.wscale, seg.options_len = mss, ws, hl - 20
    -- The payload by position in the frame's string (pay: its first byte, pay_len: captured
    -- bytes), not copied: payload_of cuts it out where a string is needed.
    seg.pkt, seg.pay, seg.pay_len = pkt, p + hl, cap_end > p + hl and cap_end - p - hl or 0
    seg.wire_len = wire_len - hl
    seg.sack_left, seg.sack_right = sl, sr
    seg.has_ts, seg.tsval, seg.tsecr = ts, tv, te
    return true
  end

  local function decode_ipv4(pkt, p, n, extra, seg)
    local have = n - p + 1
    if have < 20 then return false end
    local v, _, t1, t2, _, _, f1, f2, _, proto = byte(pkt, p, p + 9)
    local hl = (v % 16) * 4
    if v - v % 16 ~= 64 or hl < 20 or have < hl then return false end
    if proto ~= 6 then return false end
    if (f1 % 64) * 256 + f2 ~= 0 then return false end  -- MF or a fragment offset
    local on_wire = have + extra
    local total = t1 * 256 + t2
    seg.cut = total == 0 or total > have
    if total == 0 then total = on_wire end
    if total < hl then return false end
    if total > on_wire then total = on_wire end
    local captured = total < have and total or have
    if not decode_tcp(pkt, p + hl, p + captured, total - hl, seg) then return false end
    local by_ports = flows[sub(pkt, p + 12, p + 19)]  -- name_flow's cache, looked up here first
    local f = by_ports and by_ports[seg.sport * 65536 + seg.dport]
    if f then
      seg.src, seg.dst, seg.key = f[1], f[2], f[3]
    else
      name_flow(pkt, p + 12, 4, seg)
    end
    return true
  end

  local function decode_ipv6(pkt, p, n, extra, seg)
    local have = n - p + 1
    if have < 40 or byte(pkt, p) - byte(pkt, p) % 16 ~= 96 then return false end
    local on_wire = have + extra
    local total = 40 + be16(pkt, p + 4)
    seg.cut = total == 40 or total > have
    if total == 40 then total = on_wire end
    total = min(total, on_wire)
    local nxt, off = byte(pkt, p + 6), 40
    local depth = 0
    while nxt ~= 6 do
      if depth == MAX_NESTING then return false end
      depth = depth + 1
      local len = 0
      if nxt == 0 or nxt == 43 or nxt == 60 then  -- hop-by-hop, routing, destination options
        if have >= off + 2 then len = (byte(pkt, p + off + 1) + 1) * 8 end
      elseif nxt == 51 then  -- authentication header: 4-octet units, minus 2
        if have >= off + 2 then len = (byte(pkt, p + off + 1) + 2) * 4 end
      elseif nxt == 44 then  -- fragment header: only an atomic fragment (offset 0, M = 0) is whole
        if have >= off + 8 then
          local fo = be16(pkt, p + off + 2)
          if fo >= 8 or fo % 2 ~= 0 then return false end  -- & 0xfff9
          len = 8
        end
      else
        return false
      end
      if len == 0 then return false end
      nxt = byte(pkt, p + off)
      off = off + len
      if off > total then return false end
    end
    if have < off then return false end
    local captured = min(total, have)
    if not decode_tcp(pkt, p + off, p + captured, total - off, seg) then return false end
    name_flow(pkt, p + 8, 16, seg)
    return true
  end

  local function decode_ip_any(pkt, p, n, extra, seg)
    if p > n then return false end
    local v = byte(pkt, p)
    v = v - v % 16
    if v == 64 then return decode_ipv4(pkt, p, n, extra, seg) end
    if v == 96 then return decode_ipv6(pkt, p, n, extra, seg) end
    return false
  end

  local function decode_ethertype(typ, pkt, p, n, extra, seg)
    for _ = 1, MAX_NESTING do
      if typ == 0x0800 then return decode_ipv4(pkt, p, n, extra, seg)
      elseif typ == 0x86dd then return decode_ipv6(pkt, p, n, extra, seg)
      elseif typ == 0x8100 or typ == 0x88a8 or typ == 0x9100 then  -- 802.1Q/802.1ad: TCI, inner type
        if n - p + 1 < 4 then return false end
        typ = be16(pkt, p + 2)
        p = p + 4
      elseif typ == 0x8847 or typ == 0x8848 then  -- MPLS: labels to bottom-of-stack, then IP
        local off = 0
        while true do
          if n - p + 1 < off + 4 then return false end
          local bottom = byte(pkt, p + off + 2) % 2 == 1
          off = off + 4
          if bottom then break end
          if off / 4 >= MAX_NESTING then return false end
        end
        return decode_ip_any(pkt, p + off, n, extra, seg)
      elseif typ == 0x8864 then  -- PPPoE session: 6-byte header, then the PPP protocol
        if n - p + 1 < 8 then return false end
        local proto = be16(pkt, p + 6)
        if proto == 0x0021 then return decode_ipv4(pkt, p + 8, n, extra, seg) end
        if proto == 0x0057 then return decode_ipv6(pkt, p + 8, n, extra, seg) end
        return false
      else
        return false
      end
    end
    return false
  end

  local function decode_ethernet(pkt, n, extra, seg)
    if n < 14 then return false end
    local t1, t2 = byte(pkt, 13, 14)
    if t1 == 8 and t2 == 0 then return decode_ipv4(pkt, 15, n, extra, seg) end  -- most frames
    local typ = t1 * 256 + t2
    if typ <= 1500 then  -- 802.3 length: only LLC/SNAP (AA AA 03, OUI, ethertype) can carry IP
      if n < 22 or byte(pkt, 15) ~= 0xaa or byte(pkt, 16) ~= 0xaa or byte(pkt, 17) ~= 0x03 then return false end
      return decode_ethertype(be16(pkt, 21), pkt, 23, n, extra, seg)
    end
    return decode_ethertype(typ, pkt, 15, n, extra, seg)
  end
  local function decode_sll(pkt, n, extra, seg)  -- Linux cooked v1: the protocol in bytes 15-16
    if n < 16 then return false end
    return decode_ethertype(be16(pkt, 15), pkt, 17, n, extra, seg)
  end
  local function decode_sll2(pkt, n, extra, seg)  -- Linux cooked v2: 20 bytes, protocol first
    if n < 20 then return false end
    return decode_ethertype(be16(pkt, 1), pkt, 21, n, extra, seg)
  end
  local function raw_ip(pkt, n, extra, seg) return decode_ip_any(pkt, 1, n, extra, seg) end
  local function raw_ipv4(pkt, n, extra, seg) return decode_ipv4(pkt, 1, n, extra, seg) end
  local function raw_ipv6(pkt, n, extra, seg) return decode_ipv6(pkt, 1, n, extra, seg) end
  local function decode_null(pkt, n, extra, seg)  -- BSD loopback: 4-byte family; the IP version says the same
    if n < 4 then return false end
    return decode_ip_any(pkt, 5, n, extra, seg)
  end
  local function decode_ppp(pkt, n, extra, seg)  -- with or without the HDLC address/control bytes FF 03
    local p = 1
    if n >= 2 and byte(pkt, 1) == 0xff and byte(pkt, 2) == 0x03 then p = 3 end
    if n - p + 1 < 2 then return false end
    local proto = be16(pkt, p)
    if proto == 0x0021 then return decode_ipv4(pkt, p + 2, n, extra, seg) end
    if proto == 0x0057 then return decode_ipv6(pkt, p + 2, n, extra, seg) end
    return false
  end

  -- By pcap link type, as the CLI's table.
  local BY_LINK_TYPE = { [1] = decode_ethernet, [113] = decode_sll, [276] = decode_sll2, [101] = raw_ip,
                         [12] = raw_ip, [14] = raw_ip, [228] = raw_ipv4, [229] = raw_ipv6, [0] = decode_null,
                         [108] = decode_null, [9] = decode_ppp, [50] = decode_ppp }

  PacketDecoder = {
    -- decode(pkt, n, extra, seg) -> true when the frame holds a whole (not fragmented) TCP
    -- segment. seg.cut says whether the IP datagram reached past the captured bytes (or left its
    -- length to the frame), that is whether `extra` mattered: a reader that pays to learn the
    -- frame's wire length may pass 0 first, and decode again with it only then.
    fast_decoder = function(linktype) return BY_LINK_TYPE[linktype] end,
    -- Wireshark does not tell a Lua plugin the frame's link type: the glue tries these in turn
    -- and keeps the one whose segment has the ports Wireshark's TCP dissector saw.
    CANDIDATES = { decode_ethernet, decode_sll, decode_sll2, raw_ip, decode_null, decode_ppp },
  }
end
