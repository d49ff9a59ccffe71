// SPDX-License-Identifier: GPL-2.0-or-later
// The capture reader's insides, shared by its files: streams behind a stdio FILE* and the pipe that
// feeds wiretap (capture_streams.cpp), what a file is (file_probe.cpp), opening one
// (capture_open.cpp), live capture (live_capture.cpp) and the one walk over the records
// (capture_reader.cpp).
#pragma once

#include <pcap/pcap.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "input/capture_reader.hpp"
#include "input/decompress.hpp"
#include "input/file_read_ahead.hpp"
#include "input/tins_decoder.hpp"
#include "input/wiretap_reader.hpp"

namespace iscsi_doctor::cli {
namespace input {

constexpr uint32_t kPcapMagics[] = {0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1};
constexpr uint32_t kPcapngMagic = 0x0a0d0d0a;  // section header block type
constexpr size_t kStreamBuffer = 256 * 1024;

constexpr size_t kFileBuffer = 1 << 20;       // stdio's default (4 KiB) costs a read() per ~3 packets
constexpr size_t kWindow = 1 << 20;           // bytes read at once by the pcap walker: stays in cache
constexpr uint64_t kProgressEvery = 1 << 16;  // packets between progress calls
constexpr int kPacketNoticesShown = 5;        // per kind of packet problem, then only counted
// A pcapng stream's first bytes are kept (up to this many) so that wiretap can read it from the
// start when libpcap meets a second link type.
constexpr size_t kStreamRecordMax = 32 << 20;

constexpr int kDltRawOpenBsd = 14;

// A stream (standard input, a pipe, a FIFO) behind a stdio FILE*: the bytes read ahead to
// recognise it are handed back first, then the rest as it comes from the file descriptor, or from
// another FILE* (the decompressed side of a compressed stream).
struct StreamCookie {
  int fd = -1;          // read from this (owned) ...
  FILE* src = nullptr;  // ... or this (owned)
  std::vector<uint8_t> head;
  size_t head_pos = 0;
  std::atomic<uint64_t>* consumed = nullptr;  // bytes taken from fd, for progress and the size read
  std::vector<uint8_t>* record = nullptr;     // while set: every byte handed on is appended here
};

// Owns the pcap_t: closing it closes the FILE* and the decompressor with it.
class OfflineHandle {
public:
  explicit OfflineHandle(pcap_t* handle) : handle_(handle) {}
  ~OfflineHandle() {
    if (handle_) pcap_close(handle_);
  }
  OfflineHandle(const OfflineHandle&) = delete;
  OfflineHandle& operator=(const OfflineHandle&) = delete;
  pcap_t* get_pcap_handle() const { return handle_; }

private:
  pcap_t* handle_;
};

// wiretap reads a file by name: a stream, or a file we decompress, reaches it through a pipe
// (/dev/fd/N, read once front to back as tshark reads one). A thread copies `prefix`, then the rest
// of `src` (owned) into it; it ends when src does or when wiretap closes the pipe.
class PipeFeed {
public:
  PipeFeed(FILE* src, std::vector<uint8_t> prefix);
  ~PipeFeed();
  PipeFeed(const PipeFeed&) = delete;
  PipeFeed& operator=(const PipeFeed&) = delete;
  std::string path() const { return fmt::format("/dev/fd/{}", rfd_); }
  // wiretap has a descriptor of its own: closing ours lets the feed end when wiretap's closes.
  void opened() {
    if (rfd_ >= 0) ::close(rfd_);
    rfd_ = -1;
  }
  // After wiretap met the end of the pipe: the thread is done (its last writes happen before).
  void finish() {
    if (thread_.joinable()) thread_.join();
  }

private:
  int rfd_ = -1;
  std::thread thread_;
};

FileFormat format_of(const uint8_t* b, size_t n);
// The signal that ended a stream (end_streams_on_signal), 0 while none has.
extern volatile sig_atomic_t g_stream_signal;
FILE* stream_file(StreamCookie* c);
// Up to n bytes from f (fewer only at its end).
size_t read_head(FILE* f, uint8_t* out, size_t n);
// wiretap on src's bytes after `prefix` (through a PipeFeed kept in `feed`); null with `error` when
// wiretap does not know them.
std::unique_ptr<WiretapFile> open_fed(FILE* src, std::vector<uint8_t> prefix, std::unique_ptr<PipeFeed>& feed,
                                      std::string& error);
// "EN10MB", "LINUX_SLL2", ... ("DLT n" for one libpcap does not name).
std::string dlt_name(int dlt);
std::string dlt_description(int dlt);
std::string describe_errno(const std::string& path, int err);
std::string not_a_capture(const std::string& path);
// Why what a compressed input holds is no capture, from its first n (up to 4) decompressed bytes;
// "" when it starts like one.
std::string compressed_capture_error(const std::string& path, Compression c, bool stream, const uint8_t* head,
                                     size_t n, const DecompressStatus& status);
// A file wiretap opened: its format and whether its packets have a link type we decode.
bool wiretap_knows(const WiretapFile* wt, FileProbe& p);

}  // namespace input

using namespace input;

struct CaptureReader::Impl {
  std::string path;
  FileProbe probe;
  std::unique_ptr<OfflineHandle> handle;
  std::shared_ptr<DecompressStatus> decomp;  // of a compressed input: what decompressing it met
  std::atomic<uint64_t> consumed = 0;        // of a stream: bytes read from it (wiretap's feed counts too)
  DecodeFn decode = nullptr;
  std::string_view decoder;
  DecoderChoice choice = DecoderChoice::fast;
  // wiretap, when it reads the file (feed: the pipe it reads a stream or decompressed file from;
  // destroyed after wt, which closes the pipe's other end).
  std::unique_ptr<PipeFeed> feed;
  std::unique_ptr<WiretapFile> wt;
  uint64_t skip_packets = 0;  // handed on by libpcap before it gave up: not handed on again
  std::string switched;       // why libpcap gave the file over to wiretap part-way
  struct Link {
    int key;  // WiretapRecord::encap
    DecodeFn decode;
    std::string name, description;
    bool warned = false;
  };
  std::vector<Link> links;  // wiretap: the decoder of each link type met, in the order met
  bool used_fast = false, used_tins = false;
  // A pcapng stream: its cookie keeps the first bytes read (stream_record) so that wiretap can
  // take it over from its start.
  StreamCookie* recording = nullptr;
  std::vector<uint8_t> stream_record;
  // Uncompressed pcap 2.4: the records walked in place in a window of the file read with read()
  // (libpcap has checked the file header). libpcap's copy of each packet was over half of a run's
  // time; a mapped file cost page faults and cache misses on each record's first touch.
  int fd = -1;
  std::vector<uint8_t> window;
  const uint8_t* win = nullptr;     // the window's first byte: in `window`, or in a chunk read ahead
  size_t win_pos = 0, win_end = 0;  // unread records: win[win_pos, win_end)
  uint64_t win_offset = 0;          // file offset of win[0]
  // The rest of the file read on a thread of its own (read_file_ahead); the chunk the window is in,
  // and a record longer than a chunk's room before it, gathered.
  std::unique_ptr<FileReadAhead> ahead;
  FileReadAhead::Chunk* chunk = nullptr;
  std::vector<uint8_t> gathered;
  uint64_t file_size = 0;           // a record claiming more is cut short, not read into memory
  bool at_eof = false;
  int read_errno = 0;
  bool swapped = false, nanosecond = false;
  uint32_t snaplen = 0;
  // A live capture: its settings, when it began, and the pcap file -w writes.
  const LiveCapture* live = nullptr;
  uint64_t max_packets = 0;  // -c on a file
  std::chrono::steady_clock::time_point live_start;
  pcap_dumper_t* dump = nullptr;
  std::string live_warning;  // pcap_activate's, if any
  bool live_usec = false;    // the interface stamps microseconds only
  int live_fd = -1;          // polled between packets

  ~Impl() {
    ahead.reset();  // its thread reads fd
    if (fd >= 0) ::close(fd);
    if (dump) pcap_dump_close(dump);
  }

  // The chosen decoder of a link type if it knows it, else the other one (null: neither).
  static DecodeFn pick_decoder(int dlt, DecoderChoice choice, std::string_view& name) {
    const bool tins_first = choice == DecoderChoice::libtins;
    for (int pass = 0; pass < 2; ++pass) {
      const bool tins = (pass == 0) == tins_first;
      if (const DecodeFn fn = tins ? tins_decoder(dlt) : fast_decoder(dlt)) {
        name = tins ? "libtins" : "fast";
        return fn;
      }
    }
    return nullptr;
  }

  // The decoder of the handle's link type; `what` names the input in the error.
  void choose_decoder(DecoderChoice c, const std::string& what);

  // wiretap reads a file libpcap cannot: a regular one by name, a compressed one through a pipe from
  // our decompressor. Throws CaptureError naming the file.
  void open_wiretap_file();

  // wiretap's link type `key` (a record's encap, with its DLT): its decoder, and its names.
  Link& link_of(int key, int dlt);

  // wiretap's read is over: its file closed, its feed ended (what the decompressor met is final).
  void close_wiretap();

  // libpcap gave up on the file after `delivered` packets because an interface has another link
  // type: wiretap reads it from its start, those packets passed over. False when it cannot (a
  // stream whose start was not kept, or no wiretap).
  bool switch_to_wiretap(uint64_t delivered);

  // A live capture ends on Ctrl-C/SIGTERM, after --duration or --count.
  bool live_done(uint64_t packets) const;

  void try_direct(const std::string& file);
  // At least n unread bytes in the window, unless the file ends first (false).
  bool fill(size_t n) {
    if (win_end - win_pos >= n) return true;
    if (at_eof) return false;
    if (ahead) return fill_ahead(n);
    std::memmove(window.data(), window.data() + win_pos, win_end - win_pos);
    win_offset += win_pos;
    win_end -= win_pos;
    win_pos = 0;
    if (window.size() < n) window.resize(n);  // a record longer than the window
    win = window.data();
    while (win_end < n) {
      const ssize_t got = ::read(fd, window.data() + win_end, window.size() - win_end);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        if (got < 0) read_errno = errno;
        at_eof = true;
        return false;
      }
      win_end += size_t(got);
    }
    return true;
  }
  // fill from the chunks read ahead: the unread end of the window goes into the room before the
  // next chunk's data (or, longer than that room, into `gathered` with the chunk's data after it).
  bool fill_ahead(size_t n) {
    while (win_end - win_pos < n) {
      FileReadAhead::Chunk* c = ahead->next();
      if (!c) {
        read_errno = ahead->error();
        at_eof = true;
        return false;
      }
      const size_t left = win_end - win_pos;
      if (left <= FileReadAhead::kHead) {
        uint8_t* start = c->data() - left;
        std::memcpy(start, win + win_pos, left);
        win = start;
        win_end = left + c->size;
      } else {
        if (win == gathered.data())
          gathered.erase(gathered.begin(), gathered.begin() + std::ptrdiff_t(win_pos));
        else
          gathered.assign(win + win_pos, win + win_end);
        gathered.insert(gathered.end(), c->data(), c->data() + c->size);
        win = gathered.data();
        win_end = gathered.size();
      }
      if (chunk) ahead->give_back(chunk);
      chunk = c;
      win_offset = c->offset - left;
      win_pos = 0;
    }
    return true;
  }
  void read_file_ahead() {
    if (fd >= 0 && !at_eof && !ahead) ahead = std::make_unique<FileReadAhead>(fd, win_offset + win_end);
  }
  uint32_t field32(const uint8_t* b) const {
    uint32_t v;
    std::memcpy(&v, b, 4);
    return swapped ? __builtin_bswap32(v) : v;
  }
  uint16_t field16(const uint8_t* b) const {
    uint16_t v;
    std::memcpy(&v, b, 2);
    return swapped ? __builtin_bswap16(v) : v;
  }

  // A stream: its first bytes say what it is (looked at through the decompressor when compressed),
  // then libpcap reads it, those bytes handed back first. Throws CaptureError as probe_file's
  // messages say.
  pcap_t* open_stream(char* errbuf);

  uint64_t bytes_done();

  // The one walk over a file's records, for the first pass (only == null: every frame) and the
  // second (only: merged, sorted ranges; the frames outside them are passed over undecoded).
  ReadStats read(ReaderEvents& events, const FrameRanges* only);
};

}  // namespace iscsi_doctor::cli
