---------------------------------------------------------------------------------------------
-- StreamDetector (engine/src/iscsi/detector.cpp): iSCSI on a port not known to carry it, in a
-- connection joined mid-session (no SYN, no login), recognised from PDU structure in both
-- directions (docs/rules.md "Ports").

local StreamDetector = {}
StreamDetector.__index = StreamDetector
local DETECT_ANSWERS_NEEDED, DETECT_HEADERS_MAX, DETECT_SEGMENTS_MAX, DETECT_COMMANDS_KEPT = 2, 64, 4096, 16

function StreamDetector.new()
  return setmetatable({ itts = { [0] = {}, [1] = {} }, kept = { [0] = 0, [1] = 0 }, role = { [0] = -1, [1] = -1 },
                        answered = 0, segments = 0, headers = 0, initiator_side = -1, verdict = "undecided",
                        saw_header = false }, StreamDetector)
end

-- A header at byte p of s that passes the strict checks for the direction its opcode belongs to.
local function header_at(s, p)
  if p + 47 > #s then return nil end
  local b = parse_bhs(s, p)
  if not OPNAMES[b.opcode] or not plausible_bhs(b, is_initiator_opcode(b.opcode)) then return nil end
  return b
end
-- A payload that begins with such a header.
function StreamDetector.starts_with_header(s) return header_at(s, 1) ~= nil end

function StreamDetector:command(side, itt)
  self.itts[side][self.kept[side] % DETECT_COMMANDS_KEPT + 1] = itt
  self.kept[side] = self.kept[side] + 1
end

function StreamDetector:answer(side, itt)
  local kept = self.itts[1 - side]
  for i = 1, math.min(self.kept[1 - side], DETECT_COMMANDS_KEPT) do
    if kept[i] == itt and itt ~= 0xffffffff then
      kept[i] = 0xffffffff  -- each command counts once
      self.answered = self.answered + 1
      return
    end
  end
end

-- Walks the PDUs that start the payload; false when one points at a header that is not one.
function StreamDetector:walk(side, s)
  local off, first = 1, true
  self.saw_header = false
  while off + 47 <= #s do
    local b = header_at(s, off)
    if not b then return first end
    self.saw_header = true
    local role = is_initiator_opcode(b.opcode) and 1 or 0
    if self.role[side] >= 0 and self.role[side] ~= role then return false end
    self.role[side] = role
    if b.itt ~= 0xffffffff then
      if b.opcode == OP.ScsiCommand then self:command(side, b.itt) end
      if b.opcode == OP.ScsiResponse or b.opcode == OP.DataIn or b.opcode == OP.R2T then self:answer(side, b.itt) end
    end
    local plain = off + header_length(b, false) + pad4(b.data_length)
    local nxt
    for _, at in ipairs({ plain, plain + 4, plain + 8 }) do
      if at + 47 > #s or header_at(s, at) then nxt = at; break end
    end
    if not nxt then return false end
    off = nxt
    first = false
  end
  return true
end

function StreamDetector:feed(side, s)
  if self.verdict ~= "undecided" or #s == 0 then return self.verdict end
  local ok = self:walk(side, s)
  self.segments = self.segments + 1
  if self.saw_header and ok and self.segments <= DETECT_SEGMENTS_MAX then self.headers = self.headers + 1 end
  if not ok or self.segments > DETECT_SEGMENTS_MAX or self.headers > DETECT_HEADERS_MAX then
    self.verdict = "not_iscsi"
    return self.verdict
  end
  if self.answered >= DETECT_ANSWERS_NEEDED and self.role[0] >= 0 and self.role[1] >= 0 and self.role[0] ~= self.role[1] then
    self.verdict = "iscsi"
    self.initiator_side = self.role[0] == 1 and 0 or 1
  end
  return self.verdict
end
