// SPDX-License-Identifier: GPL-2.0-or-later
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "input/capture_reader.hpp"

namespace iscsi_doctor::cli {

// Reading and decoding on a thread of their own (--threads): the reader's events are copied
// (a segment with its payload) into batches, and the calling thread hands them on in the order
// they came, so the analysis sees exactly what it sees in one thread. At most kQueued batches
// wait: memory stays flat in capture length. Used with a target that never asks to stop early.
class ReadAhead final : public ReaderEvents {
public:
  explicit ReadAhead(ReaderEvents& to) : to_(to) {}

  ReadStats read_all(CaptureReader& reader) {
    ReadStats stats;
    std::exception_ptr read_error;
    std::thread t([&] {
      try {
        stats = reader.read_all(*this);
      } catch (...) {
        read_error = std::current_exception();
      }
      hand_over(true);
    });
    try {
      for (;;) {
        Batch b;
        {
          std::unique_lock lock(m_);
          cv_.wait(lock, [&] { return !queue_.empty(); });
          b = std::move(queue_.front());
          queue_.pop_front();
        }
        cv_.notify_all();
        const bool last = b.last;
        replay(b);
        if (last) break;
        std::lock_guard lock(m_);
        if (spare_.size() < kQueued) spare_.push_back(std::move(b));
      }
    } catch (...) {  // the analysis failed: the reader stops at its next segment
      stop_ = true;
      {
        std::lock_guard lock(m_);
        queue_.clear();
      }
      cv_.notify_all();
      t.join();
      throw;
    }
    t.join();
    if (read_error) std::rethrow_exception(read_error);
    return stats;
  }

  // The reader's side.
  void on_segment(const Segment& s) override {
    Item& it = next(Item::segment);
    it.seg = s;
    it.offset = filling_.bytes.size();
    filling_.bytes.insert(filling_.bytes.end(), s.payload.begin(), s.payload.end());
    if (filling_.n >= kBatch || filling_.bytes.size() >= kBatchBytes) hand_over(false);
  }
  void on_notice(Notice::Level level, uint64_t frame, std::string message) override {
    Item& it = next(Item::notice);
    it.level = level;
    it.a = frame;
    it.message = std::move(message);
  }
  void on_progress(uint64_t packets, uint64_t bytes) override {
    Item& it = next(Item::progress);
    it.a = packets;
    it.b = bytes;
  }
  void on_start(int64_t time_ns) override { next(Item::start).a = uint64_t(time_ns); }
  bool finished() const override { return stop_; }

private:
  static constexpr size_t kBatch = 512, kBatchBytes = size_t(1) << 18, kQueued = 4;
  struct Item {
    enum Kind : uint8_t { segment, notice, progress, start } kind = segment;
    Segment seg;
    size_t offset = 0;
    Notice::Level level{};
    uint64_t a = 0, b = 0;
    std::string message;
  };
  // Items kept when a batch is emptied, assigned over when filled again (no allocation per item).
  struct Batch {
    std::vector<Item> items;
    size_t n = 0;
    std::vector<uint8_t> bytes;
    bool last = false;
  };

  Item& next(Item::Kind kind) {
    if (filling_.n == filling_.items.size()) filling_.items.emplace_back();
    Item& it = filling_.items[filling_.n++];
    it.kind = kind;
    return it;
  }
  void hand_over(bool last) {
    filling_.last = last;
    Batch spare;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return queue_.size() < kQueued || stop_; });
      if (stop_) {  // nobody reads on: what comes until the reader stops is dropped
        filling_.n = 0;
        filling_.bytes.clear();
        return;
      }
      queue_.push_back(std::move(filling_));
      if (!spare_.empty()) {
        spare = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    cv_.notify_all();
    filling_ = std::move(spare);
    filling_.n = 0;
    filling_.bytes.clear();
    filling_.last = false;
  }
  void replay(const Batch& b) {
    for (size_t i = 0; i < b.n; ++i) {
      const Item& it = b.items[i];
      switch (it.kind) {
        case Item::segment: {
          Segment s = it.seg;
          s.payload = std::span<const uint8_t>(b.bytes.data() + it.offset, it.seg.payload.size());
          to_.on_segment(s);
          break;
        }
        case Item::notice:
          to_.on_notice(it.level, it.a, it.message);
          break;
        case Item::progress:
          to_.on_progress(it.a, it.b);
          break;
        case Item::start:
          to_.on_start(int64_t(it.a));
          break;
      }
    }
  }

  ReaderEvents& to_;
  Batch filling_;  // the reader thread's
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::vector<Batch> spare_;
  std::atomic<bool> stop_{false};
};

}  // namespace iscsi_doctor::cli
