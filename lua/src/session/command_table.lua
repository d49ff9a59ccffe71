---------------------------------------------------------------------------------------------
-- The open commands (engine/src/session/command_table.hpp): by ITT, slots reused last freed first.

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

function Connection:release_slot(c)
  self:retire(c)
  c.used = false
  self.slots[c.slot] = nil
  self.free_slots[#self.free_slots + 1] = c.slot
end
