// SPDX-License-Identifier: GPL-2.0-or-later
// The memory budget (Options::memory_budget): what the open connections hold, estimated
// (Connection::memory_bytes), and which gives it back first when it is short: one that has ended
// (FIN or RST), then an idle one (no command open or awaiting its report), then a busy one; within
// each, the least recently active. O(1) per segment: an entry moves to the back of its list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

namespace iscsi_doctor::session {

class Connection;

class MemoryBudget {
public:
  enum Class : uint8_t { ending, idle, busy, classes };
  // Kept in each Connection (no lookup per segment).
  struct Entry {
    bool in = false;
    Class cls = idle;
    size_t bytes = 0;
    std::list<Connection*>::iterator pos;
  };

  explicit MemoryBudget(size_t limit) : limit_(limit) {}
  bool on() const { return limit_ != 0; }
  size_t limit() const { return limit_; }
  size_t used() const { return used_; }
  bool short_of() const { return on() && used_ > limit_; }

  // A connection's estimate and class after its latest segment: it becomes the most recent.
  void update(Connection* c, Entry& e, size_t bytes, Class cls) {
    if (!e.in) {
      e.in = true;
      e.cls = cls;
      e.pos = order_[cls].insert(order_[cls].end(), c);
    } else if (e.cls != cls || std::next(e.pos) != order_[cls].end()) {
      order_[cls].splice(order_[cls].end(), order_[e.cls], e.pos);
      e.cls = cls;
    }
    used_ = used_ - e.bytes + bytes;
    e.bytes = bytes;
  }
  // Held to the end, not by a connection (the listed connections' facts).
  void hold(size_t bytes) { used_ += bytes; }  // wraps: hold(-n) gives n back
  void remove(Entry& e) {
    if (!e.in) return;
    order_[e.cls].erase(e.pos);
    used_ -= e.bytes;
    e = Entry{};
  }
  // The connection to give its memory back first, other than `keep`; null: none.
  Connection* victim(const Connection* keep, Class& cls) const {
    for (int k = 0; k < classes; ++k)
      for (Connection* c : order_[k]) {
        if (c == keep) continue;
        cls = Class(k);
        return c;
      }
    return nullptr;
  }

private:
  size_t limit_, used_ = 0;
  std::list<Connection*> order_[classes];
};

}  // namespace iscsi_doctor::session
