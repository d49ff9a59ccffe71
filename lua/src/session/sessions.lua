---------------------------------------------------------------------------------------------
-- SessionRegistry (engine/src/session/sessions.hpp): groups connections into iSCSI sessions, by
-- initiator name, ISID, target and TSIH once a login is seen (RFC 7143 4.4), else one session
-- per connection. Also what connections between the same two hosts share: the link
-- (docs/rules.md "The link").

local SessionRegistry = {}
SessionRegistry.__index = SessionRegistry

local MAX_PATHS = 4096  -- SessionRegistry::kMaxPaths

function SessionRegistry.new()
  return setmetatable({ ids_ = {}, sessions_ = {}, paths_ = {}, path_count_ = 0 }, SessionRegistry)
end

function SessionRegistry:resolve(key)
  local id = self.ids_[key]
  if not id then
    id = #self.sessions_ + 1
    self.ids_[key] = id
    self.sessions_[id] = { id = id, connections = {} }
  end
  return id
end
function SessionRegistry:info(id) return self.sessions_[id] end
function SessionRegistry:all() return self.sessions_ end

-- The link from one host to another, as all their connections' ACKs show it, keyed by the
-- addresses without ports; nil beyond MAX_PATHS host pairs, where each connection has its own.
function SessionRegistry:path(from, to)
  local key = (from:match("^(.*):%d+$") or from) .. ">" .. (to:match("^(.*):%d+$") or to)
  local m = self.paths_[key]
  if m then return m end
  if self.path_count_ >= MAX_PATHS then return nil end
  m = LinkMeter.new()
  self.paths_[key], self.path_count_ = m, self.path_count_ + 1
  return m
end
