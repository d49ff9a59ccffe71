// SPDX-License-Identifier: GPL-2.0-or-later
// The commands of one connection by slot: open ones by ITT (the initiator's task tag), those
// answered but not yet reported (settling), and free slots for reuse (last freed, first reused).
// Slot 0 means "none". A command is *open* until its status is seen (or it is dropped): only open
// commands are found by ITT and counted in flight.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "session/command.hpp"

namespace iscsi_doctor::session {

class CommandTable {
public:
  // Slot s is slots_[s - 1]: slot 0 ("none") takes no storage.
  OpenCommand& operator[](uint32_t slot) { return slots_[slot - 1]; }
  const OpenCommand& operator[](uint32_t slot) const { return slots_[slot - 1]; }
  uint32_t end() const { return uint32_t(slots_.size()) + 1; }  // slots are 1 .. end() - 1

  uint32_t find(uint32_t itt) const {
    auto it = by_itt_.find(itt);
    return it == by_itt_.end() ? 0 : it->second;
  }
  size_t open_count() const { return open_.size(); }
  size_t itt_count() const { return by_itt_.size(); }
  const std::vector<uint32_t>& open_slots() const { return open_; }  // in no order
  size_t memory_bytes() const {  // heap bytes held (the memory budget); a findings list counted by its kinds
    return slots_.capacity() * sizeof(OpenCommand) + (free_.capacity() + open_.capacity()) * sizeof(uint32_t) +
           by_itt_.bucket_count() * sizeof(void*) + by_itt_.size() * 32;
  }

  // A new open command for itt (the caller has released any open one with the same ITT).
  uint32_t open(uint32_t itt) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slots_.emplace_back();
      slot = uint32_t(slots_.size());
    }
    OpenCommand& c = (*this)[slot];
    c.used = true;
    c.r.itt = itt;
    c.open_pos = uint32_t(open_.size());
    open_.push_back(slot);
    by_itt_[itt] = slot;
    return slot;
  }

  // Off the ITT table and the open list: answered (settling) or gone. Settling commands were
  // retired when they completed.
  void retire(uint32_t slot) {
    OpenCommand& c = (*this)[slot];
    if (c.settling) return;
    if (c.open_pos < open_.size() && open_[c.open_pos] == slot) {
      open_[c.open_pos] = open_.back();
      (*this)[open_.back()].open_pos = c.open_pos;
      open_.pop_back();
    }
    auto it = by_itt_.find(c.r.itt);
    if (it != by_itt_.end() && it->second == slot) by_itt_.erase(it);
  }

  // Retired and its slot freed.
  void release(uint32_t slot) {
    retire(slot);
    (*this)[slot] = OpenCommand{};
    free_.push_back(slot);
  }

private:
  std::vector<OpenCommand> slots_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> open_;  // used and not settling
  std::unordered_map<uint32_t, uint32_t> by_itt_;
};

}  // namespace iscsi_doctor::session
