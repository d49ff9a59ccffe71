// SPDX-License-Identifier: GPL-2.0-or-later
// A pcap file read ahead in chunks on a thread of its own, for the walk over its records in place
// (capture_internal.hpp, Impl::fill): the kernel's copy of each byte from the page cache was an
// eighth of a small-block run's time, on the analysis thread. Each chunk keeps kHead bytes free
// before its data, where the walk puts the unread end of the chunk it leaves (a record the chunk
// boundary cut), so no other byte is copied twice. At most kChunks chunks exist (3.4 MiB).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace iscsi_doctor::cli {

class FileReadAhead {
public:
  static constexpr size_t kChunk = 1 << 20;    // read at once (the walk's window without it)
  static constexpr size_t kHead = 128 << 10;   // room for a cut record's first part (a TSO/GRO one too)
  static constexpr size_t kChunks = 3;         // one walked, two read ahead (reading one takes a
                                               // tenth of the time its records take)

  struct Chunk {
    std::unique_ptr<uint8_t[]> mem{new uint8_t[kHead + kChunk]};  // not zeroed: read() fills it
    size_t size = 0;      // bytes read into data()
    uint64_t offset = 0;  // file offset of data()[0]
    uint8_t* data() { return mem.get() + kHead; }
  };

  // Reads fd from its current position, which is file offset `offset`.
  FileReadAhead(int fd, uint64_t offset) : fd_(fd), offset_(offset) {
    for (size_t i = 0; i < kChunks; ++i) {
      chunks_.push_back(std::make_unique<Chunk>());
      free_.push_back(chunks_.back().get());
    }
    thread_ = std::thread([this] { run(); });
  }
  FileReadAhead(const FileReadAhead&) = delete;
  FileReadAhead& operator=(const FileReadAhead&) = delete;
  ~FileReadAhead() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // The next chunk in file order, to be given back once none of its bytes is used; null at the
  // end of the file, or at a read error (error()).
  Chunk* next() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return !full_.empty() || done_; });
    if (full_.empty()) return nullptr;
    Chunk* c = full_.front();
    full_.pop_front();
    return c;
  }
  void give_back(Chunk* c) {
    {
      std::lock_guard lock(m_);
      free_.push_back(c);
    }
    cv_.notify_all();
  }
  int error() {  // the errno that ended the file early (0: its end)
    std::lock_guard lock(m_);
    return error_;
  }

private:
  void run() {
    for (;;) {
      Chunk* c;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return !free_.empty() || stop_; });
        if (stop_) return;
        c = free_.back();
        free_.pop_back();
      }
      size_t got = 0;
      int err = 0;
      while (got < kChunk) {
        const ssize_t n = ::read(fd_, c->data() + got, kChunk - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) err = errno;
        if (n <= 0) break;
        got += size_t(n);
      }
      c->size = got;
      c->offset = offset_;
      offset_ += got;
      const bool last = got < kChunk;
      {
        std::lock_guard lock(m_);
        if (got)
          full_.push_back(c);
        else
          free_.push_back(c);
        if (last) {
          done_ = true;
          error_ = err;
        }
      }
      cv_.notify_all();
      if (last) return;
    }
  }

  int fd_;
  uint64_t offset_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Chunk*> free_;
  std::deque<Chunk*> full_;
  bool done_ = false, stop_ = false;
  int error_ = 0;
  std::thread thread_;
};

}  // namespace iscsi_doctor::cli
