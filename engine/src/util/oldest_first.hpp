// SPDX-License-Identifier: GPL-2.0-or-later
#pragma once

#include <cstddef>
#include <deque>
#include <map>

namespace iscsi_doctor::util {

// Entries by key (a connection's), at most `max`: a new one evicts the oldest (insertion order). The order
// drops the keys erased since once it reaches twice the bound, so it stays bounded too.
template <typename Key, typename V>
struct OldestFirst {
  std::map<Key, V> entries;
  std::deque<Key> order;
  typename std::map<Key, V>::iterator insert(const Key& key, size_t max) {
    while (entries.size() >= max && !order.empty()) {
      entries.erase(order.front());
      order.pop_front();
    }
    if (order.size() >= 2 * max) {
      std::deque<Key> kept;
      for (const Key& k : order)
        if (entries.count(k)) kept.push_back(k);
      order.swap(kept);
    }
    order.push_back(key);
    return entries.emplace(key, V{}).first;
  }
};

}  // namespace iscsi_doctor::util
