// SPDX-License-Identifier: GPL-2.0-or-later
// A first-in first-out queue on a vector: allocates nothing until the first push (std::deque
// allocates ~600 bytes when constructed, and a connection holds several queues per direction,
// most of them empty or short), random access and contiguous iteration for binary searches.
// Popped slots are reclaimed when they are at least half of the storage (amortized O(1)).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace iscsi_doctor::util {

template <typename T>
class Fifo {
public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;
  using reverse_iterator = typename std::vector<T>::reverse_iterator;
  using const_reverse_iterator = typename std::vector<T>::const_reverse_iterator;

  bool empty() const { return head_ == v_.size(); }
  size_t size() const { return v_.size() - head_; }
  size_t capacity() const { return v_.capacity(); }
  T& front() { return v_[head_]; }
  const T& front() const { return v_[head_]; }
  T& back() { return v_.back(); }
  const T& back() const { return v_.back(); }
  T& operator[](size_t i) { return v_[head_ + i]; }
  const T& operator[](size_t i) const { return v_[head_ + i]; }
  iterator begin() { return v_.begin() + std::ptrdiff_t(head_); }
  iterator end() { return v_.end(); }
  const_iterator begin() const { return v_.begin() + std::ptrdiff_t(head_); }
  const_iterator end() const { return v_.end(); }
  reverse_iterator rbegin() { return v_.rbegin(); }
  reverse_iterator rend() { return v_.rend() - std::ptrdiff_t(head_); }
  const_reverse_iterator rbegin() const { return v_.rbegin(); }
  const_reverse_iterator rend() const { return v_.rend() - std::ptrdiff_t(head_); }

  void push_back(T x) { v_.push_back(std::move(x)); }
  void pop_front() {
    ++head_;
    if (head_ == v_.size()) {
      v_.clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), v_.begin() + std::ptrdiff_t(head_));
      head_ = 0;
    }
  }
  void clear() {
    v_.clear();
    head_ = 0;
  }

private:
  std::vector<T> v_;
  size_t head_ = 0;
};

}  // namespace iscsi_doctor::util
