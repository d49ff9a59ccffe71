---------------------------------------------------------------------------------------------
-- What a rule takes besides the command it judges (the engine's rules/view.hpp): a read-only view
-- of its connection (ConnectionView), and where its findings go (FindingOut).
--
-- FindingOut, methods of the object given as `out` (the Connection):
--   out:finding(kind, side, frame, lost_ms, c)  a finding of the connection, tied to command c
--                                               when there is one (c may be nil)
--   out:emit_finding(f)                         stamps it (session, connection, inferred facts)
--                                               and hands it on
--   out:notice(level, frame, message)           the engine's notices (this port gives none)

-- The connection as a rule may see it: both flows and round trips (the TCP tracker) and the
-- options. Made once per connection (the tracker it reads is live); rules change nothing in it.
local ConnectionView = {}
ConnectionView.__index = ConnectionView

function ConnectionView.new(id, tcp, options)
  return setmetatable({ id = id, tcp = tcp, options = options }, ConnectionView)
end
function ConnectionView:flow(dir) return self.tcp:flow(dir) end
function ConnectionView:rtt_ns(side_dir) return self.tcp:rtt_ns(side_dir) end  -- capture point <-> that side
function ConnectionView:full_rtt_ns() return self.tcp:full_rtt_ns() end
function ConnectionView:tolerance_ns() return release_tolerance_ns(self.tcp:full_rtt_ns()) end
function ConnectionView:wait_min_ns() return wait_min_ns(self.tcp:full_rtt_ns()) end
-- The capture point is near this side (its round trip a small part of the path's).
local VANTAGE_MIN_RTT_NS = floor(RULES.vantage_min_rtt_ms * 1e6 + 0.5)
function ConnectionView:near(side_dir)
  local full = self.tcp:full_rtt_ns()
  return self.tcp:rtt(I2T):known() and self.tcp:rtt(T2I):known() and full >= VANTAGE_MIN_RTT_NS and
         self.tcp:rtt_ns(side_dir) * RULES.near_initiator_rtt_factor < full
end
