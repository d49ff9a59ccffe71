// SPDX-License-Identifier: GPL-2.0-or-later
// libpcap reads the file (pcap and pcapng alike, timestamps scaled to nanoseconds); a compressed
// file is decompressed behind a stdio FILE* (fopencookie, decompress.hpp) that libpcap reads like
// any other. The pcap_t is owned by a libtins BaseSniffer, which closes it. Each packet goes to the
// decoder chosen for the link type (packet_decoder.hpp) and, when it is TCP, to the caller as a
// Segment.
//
// What libpcap cannot read goes through libwiretap (wiretap_reader.hpp), each packet to the decoder
// of its own link type: a format libpcap does not know, from the start; a pcapng whose interfaces
// differ in link type, from where libpcap gives up (it reads the first interface only when it opens
// the file), the frames it already handed on skipped. wiretap opens files by name: a stream, or a
// file we decompress, reaches it through a pipe fed by a thread (PipeFeed), never through the disk.
#include "input/capture_reader.hpp"

#include <fcntl.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <tins/sniffer.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "input/decompress.hpp"
#include "input/packet_decoder.hpp"
#include "input/wiretap_reader.hpp"

namespace iscsi_doctor::cli {
namespace {

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

FileFormat format_of(const uint8_t* b, size_t n) {
  if (n < 4) return FileFormat::unknown;
  const uint32_t m = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  for (uint32_t magic : kPcapMagics)
    if (m == magic) return FileFormat::pcap;
  if (m == kPcapngMagic) return FileFormat::pcapng;
  return FileFormat::unknown;
}

volatile sig_atomic_t g_stream_signal = 0;

void on_stream_signal(int sig) {
  g_stream_signal = sig;
  std::signal(sig, SIG_DFL);  // a second one kills
}

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

ssize_t stream_read_raw(StreamCookie* c, char* buf, size_t size) {
  if (c->head_pos < c->head.size()) {
    const size_t n = std::min(size, c->head.size() - c->head_pos);
    std::memcpy(buf, c->head.data() + c->head_pos, n);
    c->head_pos += n;
    return ssize_t(n);
  }
  if (c->src) {
    const size_t n = std::fread(buf, 1, size, c->src);
    if (n == 0 && std::ferror(c->src)) {
      errno = EIO;
      return -1;
    }
    return ssize_t(n);
  }
  for (;;) {
    if (g_stream_signal) return 0;
    const ssize_t n = ::read(c->fd, buf, size);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0 && c->consumed) *c->consumed += uint64_t(n);
    return n;
  }
}

ssize_t stream_read(void* cookie, char* buf, size_t size) {
  auto* c = static_cast<StreamCookie*>(cookie);
  const ssize_t n = stream_read_raw(c, buf, size);
  if (n > 0 && c->record) {
    if (c->record->size() + size_t(n) <= kStreamRecordMax) {
      c->record->insert(c->record->end(), buf, buf + n);
    } else {  // too long to keep: a later switch to wiretap is no longer possible
      std::vector<uint8_t>().swap(*c->record);
      c->record = nullptr;
    }
  }
  return n;
}

int stream_close(void* cookie) {
  auto* c = static_cast<StreamCookie*>(cookie);
  int rc = 0;
  if (c->src) rc = std::fclose(c->src);
  if (c->fd > 0) ::close(c->fd);  // standard input (0) stays open
  delete c;
  return rc;
}

FILE* stream_file(StreamCookie* c) {
  FILE* f = fopencookie(c, "r", cookie_io_functions_t{stream_read, nullptr, nullptr, stream_close});
  if (!f) {
    stream_close(c);
    return nullptr;
  }
  setvbuf(f, nullptr, _IOFBF, kStreamBuffer);
  return f;
}

// Up to n bytes from f (fewer only at its end).
size_t read_head(FILE* f, uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t k = std::fread(out + got, 1, n - got, f);
    if (k == 0) break;
    got += k;
  }
  return got;
}

// Owns the pcap_t (BaseSniffer's destructor closes it, and with it the FILE* and the decompressor).
class OfflineHandle final : public Tins::BaseSniffer {
public:
  explicit OfflineHandle(pcap_t* handle) { set_pcap_handle(handle); }
};

// wiretap reads a file by name: a stream, or a file we decompress, reaches it through a pipe
// (/dev/fd/N, read once front to back as tshark reads one). A thread copies `prefix`, then the rest
// of `src` (owned) into it; it ends when src does or when wiretap closes the pipe.
class PipeFeed {
public:
  PipeFeed(FILE* src, std::vector<uint8_t> prefix) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      const int err = errno;
      std::fclose(src);
      throw CaptureError(fmt::format("cannot make a pipe for wiretap: {}", std::strerror(err)));
    }
    rfd_ = fds[0];
    thread_ = std::thread([src, wfd = fds[1], prefix = std::move(prefix)] {
      // Signals are the main thread's (Ctrl-C ends the read there); a closed pipe is an EPIPE here.
      sigset_t set;
      sigemptyset(&set);
      for (int sig : {SIGPIPE, SIGINT, SIGTERM})
        sigaddset(&set, sig);
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      auto put = [wfd](const uint8_t* b, size_t n) {
        while (n > 0) {
          const ssize_t w = ::write(wfd, b, n);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return false;
          b += w;
          n -= size_t(w);
        }
        return true;
      };
      bool ok = put(prefix.data(), prefix.size());
      std::vector<uint8_t> buf(kStreamBuffer);
      while (ok) {
        const size_t n = std::fread(buf.data(), 1, buf.size(), src);
        if (n == 0) break;
        ok = put(buf.data(), n);
      }
      ::close(wfd);
      std::fclose(src);
    });
  }
  ~PipeFeed() {
    opened();
    if (!thread_.joinable()) return;
    // A stream stopped by a signal may block its reader for ever: let it go with the process.
    if (g_stream_signal)
      thread_.detach();
    else
      thread_.join();
  }
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

// wiretap on src's bytes after `prefix` (through a PipeFeed kept in `feed`); null with `error` when
// wiretap does not know them.
std::unique_ptr<WiretapFile> open_fed(FILE* src, std::vector<uint8_t> prefix, std::unique_ptr<PipeFeed>& feed,
                                      std::string& error) {
  feed = std::make_unique<PipeFeed>(src, std::move(prefix));
  auto wt = WiretapFile::open(feed->path(), error);
  feed->opened();
  if (!wt) feed.reset();
  return wt;
}

// "EN10MB", "LINUX_SLL2", ... ("DLT n" for one libpcap does not name).
std::string dlt_name(int dlt) {
  if (dlt == kDltRawOpenBsd) return "RAW";  // libpcap knows 14 by OpenBSD's name only there
  const char* name = pcap_datalink_val_to_name(dlt);
  return name ? name : fmt::format("DLT {}", dlt);
}

std::string dlt_description(int dlt) {
  if (dlt == kDltRawOpenBsd) return "Raw IP (link type 14)";
  return pcap_datalink_val_to_description_or_dlt(dlt);
}

std::string describe_errno(const std::string& path, int err) {
  return fmt::format("{}: cannot open: {}", path, std::strerror(err));
}

std::string not_a_capture(const std::string& path) {
  return fmt::format(
      "{}: not a pcap, pcapng or gzip-compressed capture (nor one compressed with xz, zstd, "
      "lz4 or bzip2){}",
      path, wiretap_available() ? ", nor another capture format Wireshark reads with packets we decode" : "");
}

// Why what a compressed input holds is no capture, from its first n (up to 4) decompressed bytes;
// "" when it starts like one.
std::string compressed_capture_error(const std::string& path, Compression c, bool stream, const uint8_t* head,
                                     size_t n, const DecompressStatus& status) {
  const std::string_view name = compression_name(c), what = stream ? "stream" : "file";
  if (n < 4)
    return status.error.empty() ? fmt::format("{}: {} {} holds no capture (too short)", path, name, what)
                                : fmt::format("{}: {}", path, status.error);
  if (format_of(head, n) == FileFormat::unknown)
    return fmt::format("{}: {} {} does not hold a pcap or pcapng capture{}", path, name, what,
                       wiretap_available() ? ", nor another capture Wireshark reads with packets we decode" : "");
  return "";
}

// A file wiretap opened: its format and whether its packets have a link type we decode.
bool wiretap_knows(const WiretapFile* wt, FileProbe& p) {
  if (!wt || !wt->decodable()) return false;
  p.format = FileFormat::other;
  p.wiretap_format = wt->type_name();
  return true;
}

}  // namespace

#ifndef ISCSI_DOCTOR_WIRETAP
// Built without libwiretap (wiretap_reader.cpp is then empty): what libpcap cannot read is refused.
bool wiretap_available() { return false; }
std::string wiretap_version() { return ""; }
struct WiretapFile::Impl {};
WiretapFile::WiretapFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WiretapFile::~WiretapFile() = default;
std::unique_ptr<WiretapFile> WiretapFile::open(const std::string&, std::string& error) {
  error = "this build has no libwiretap";
  return nullptr;
}
int WiretapFile::next(WiretapRecord&, std::string&) { return 0; }
void WiretapFile::close() {}
std::string WiretapFile::type_name() const { return ""; }
int WiretapFile::file_dlt() const { return -1; }
bool WiretapFile::decodable() const { return false; }
uint64_t WiretapFile::bytes_read() const { return 0; }
std::string WiretapFile::encap_name(int encap) { return fmt::format("encapsulation {}", encap); }
std::string WiretapFile::encap_description(int encap) { return encap_name(encap); }
#endif

std::string_view format_name(FileFormat f) {
  switch (f) {
    case FileFormat::pcap:
      return "pcap";
    case FileFormat::live:
      return "live";
    case FileFormat::pcapng:
      return "pcapng";
    case FileFormat::other:
      return "other";
    default:
      return "unknown";
  }
}

std::string_view format_name(const FileProbe& p) {
  return p.format == FileFormat::other ? std::string_view(p.wiretap_format) : format_name(p.format);
}

std::string_view reader_name(CaptureLibrary r) {
  switch (r) {
    case CaptureLibrary::libpcap:
      return "libpcap";
    case CaptureLibrary::wiretap:
      return "wiretap";
    default:
      return "";
  }
}

FileProbe probe_file(const std::string& path) {
  FileProbe p;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    p.error = describe_errno(path, errno);
    return p;
  }
  if (S_ISDIR(st.st_mode)) {
    p.error = fmt::format("{}: is a directory", path);
    return p;
  }
  p.size = uint64_t(st.st_size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    p.error = describe_errno(path, errno);
    return p;
  }
  std::array<uint8_t, kMagicBytes> head{};
  const ssize_t n = ::read(fd, head.data(), head.size());
  ::close(fd);
  if (n <= 0) {
    p.error = n == 0 ? fmt::format("{}: empty file", path)
                     : fmt::format("{}: cannot read: {}", path, std::strerror(errno));
    return p;
  }
  p.compression = compression_of(head.data(), size_t(n));
  if (p.compression != Compression::none) {  // what it holds must start like a capture
    auto status = std::make_shared<DecompressStatus>();
    FILE* src = std::fopen(path.c_str(), "rbe");
    FILE* f = src ? decompressed_file(p.compression, src, status) : nullptr;
    if (!f) {
      p.error = src ? fmt::format("{}: cannot decompress: the {} decoder failed to start", path,
                                  compression_name(p.compression))
                    : describe_errno(path, errno);
      return p;
    }
    const size_t got = read_head(f, head.data(), 4);
    std::fclose(f);
    p.error = compressed_capture_error(path, p.compression, false, head.data(), got, *status);
    if (p.error.empty()) {
      p.format = format_of(head.data(), got);
    } else if (got >= 4 && wiretap_available()) {  // another format, compressed: wiretap reads it through a pipe
      FILE* again = std::fopen(path.c_str(), "rbe");
      FILE* g = again ? decompressed_file(p.compression, again, std::make_shared<DecompressStatus>()) : nullptr;
      std::unique_ptr<PipeFeed> feed;
      std::string why;
      const auto wt = g ? open_fed(g, {}, feed, why) : nullptr;
      if (wiretap_knows(wt.get(), p)) p.error.clear();
    }
  } else {
    p.format = format_of(head.data(), size_t(n));
    if (p.format == FileFormat::unknown) {
      std::string why;
      const auto wt = wiretap_available() ? WiretapFile::open(path, why) : nullptr;
      if (!wiretap_knows(wt.get(), p)) p.error = not_a_capture(path);
    }
  }
  p.is_capture = p.format != FileFormat::unknown;
  return p;
}

void end_streams_on_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_stream_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read() returns, and the stream ends there
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool is_stream(const std::string& path) {
  if (path == "-") return true;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

std::string copy_stream_to_temporary(const std::string& path) {
  const int in = path == "-" ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw CaptureError(describe_errno(path, errno));
  const char* dir = std::getenv("TMPDIR");
  std::string tmp = fmt::format("{}/iscsi-doctor-XXXXXX", dir && *dir ? dir : "/tmp");
  const int out = ::mkstemp(tmp.data());
  if (out < 0) {
    if (in > 0) ::close(in);
    throw CaptureError(fmt::format("{}: cannot make a temporary copy: {}", path, std::strerror(errno)));
  }
  std::vector<char> buf(kFileBuffer);
  std::string error;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = fmt::format("{}: cannot read: {}", path, std::strerror(errno));
    if (n <= 0) break;
    for (ssize_t done = 0; done < n && error.empty();) {
      const ssize_t w = ::write(out, buf.data() + done, size_t(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) error = fmt::format("{}: cannot make a temporary copy: {}", path, std::strerror(errno));
      done += std::max<ssize_t>(w, 0);
    }
    if (!error.empty()) break;
  }
  if (in > 0) ::close(in);
  ::close(out);
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw CaptureError(error);
  }
  return tmp;
}

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
  size_t win_pos = 0, win_end = 0;  // unread records: window[win_pos, win_end)
  uint64_t win_offset = 0;          // file offset of window[0]
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
  void choose_decoder(DecoderChoice c, const std::string& what) {
    choice = c;
    const int dlt = pcap_datalink(handle->get_pcap_handle());
    decode = pick_decoder(dlt, choice, decoder);
    if (!decode)
      throw CaptureError(fmt::format("{}: link type {} ({}) is not supported", what, dlt, dlt_name(dlt)));
  }

  // wiretap reads a file libpcap cannot: a regular one by name, a compressed one through a pipe from
  // our decompressor. Throws CaptureError naming the file.
  void open_wiretap_file() {
    std::string why;
    if (probe.compression == Compression::none) {
      wt = WiretapFile::open(path, why);
    } else {
      FILE* src = std::fopen(path.c_str(), "rbe");
      if (!src) throw CaptureError(describe_errno(path, errno));
      decomp = std::make_shared<DecompressStatus>();
      FILE* f = decompressed_file(probe.compression, src, decomp);
      if (!f)
        throw CaptureError(fmt::format("{}: cannot decompress: the {} decoder failed to start", path,
                                       compression_name(probe.compression)));
      wt = open_fed(f, {}, feed, why);
    }
    if (!wt) throw CaptureError(fmt::format("{}: not a readable capture: {}", path, why));
  }

  // wiretap's link type `key` (a record's encap, with its DLT): its decoder, and its names.
  Link& link_of(int key, int dlt) {
    for (Link& l : links)
      if (l.key == key) return l;
    Link l{key, nullptr, "", ""};
    std::string_view name;
    if (dlt >= 0) {
      l.decode = pick_decoder(dlt, choice, name);
      l.name = dlt_name(dlt);
      l.description = dlt_description(dlt);
    }
    if (!l.decode) {  // no DLT we decode: wiretap's names say what it is
      l.name = WiretapFile::encap_name(key);
      l.description = WiretapFile::encap_description(key);
    }
    (name == "libtins" ? used_tins : used_fast) |= l.decode != nullptr;
    links.push_back(std::move(l));
    return links.back();
  }

  // wiretap's read is over: its file closed, its feed ended (what the decompressor met is final).
  void close_wiretap() {
    wt->close();
    if (feed) feed->finish();
  }

  // libpcap gave up on the file after `delivered` packets because an interface has another link
  // type: wiretap reads it from its start, those packets passed over. False when it cannot (a
  // stream whose start was not kept, or no wiretap).
  bool switch_to_wiretap(uint64_t delivered) {
    if (!wiretap_available() || live || fd >= 0) return false;
    std::string why;
    if (probe.stream) {
      if (!recording || !recording->record) return false;
      // The stream's source moves to a new cookie that hands the kept bytes back first.
      auto* c = new StreamCookie;
      c->fd = recording->fd;
      c->src = recording->src;
      c->consumed = recording->consumed;
      c->head = std::move(stream_record);
      recording->fd = -1;
      recording->src = nullptr;
      recording->record = nullptr;
      recording = nullptr;
      handle.reset();  // closes libpcap's side, and the emptied cookie with it
      FILE* f = stream_file(c);
      if (!f) return false;
      wt = open_fed(f, {}, feed, why);
    } else {
      handle.reset();
      try {
        open_wiretap_file();
      } catch (const CaptureError&) {
        return false;
      }
    }
    if (!wt) return false;
    skip_packets = delivered;
    probe.reader = CaptureLibrary::wiretap;
    return true;
  }

  // A live capture ends on Ctrl-C/SIGTERM, after --duration or --count.
  bool live_done(uint64_t packets) const {
    if (g_stream_signal) return true;
    if (live->count && packets >= live->count) return true;
    return live->duration_s > 0 &&
           std::chrono::steady_clock::now() - live_start >= std::chrono::duration<double>(live->duration_s);
  }

  void try_direct(const std::string& file) {
    fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fd = -1;
      return;
    }
    file_size = uint64_t(st.st_size);
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    window.resize(kWindow);
    if (!fill(24)) {
      ::close(fd);
      fd = -1;
      return;
    }
    const uint8_t* head = window.data();
    uint32_t magic;
    std::memcpy(&magic, head, 4);
    swapped = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
    nanosecond = magic == 0xa1b23c4d || magic == 0x4d3cb2a1;
    const uint16_t major = field16(head + 4), minor = field16(head + 6);
    snaplen = field32(head + 16);
    if (major != 2 || minor != 4 || snaplen == 0) {  // old variants: libpcap knows their quirks
      ::close(fd);
      fd = -1;
      return;
    }
    win_pos = 24;
  }
  // At least n unread bytes in the window, unless the file ends first (false).
  bool fill(size_t n) {
    if (win_end - win_pos >= n) return true;
    if (at_eof) return false;
    std::memmove(window.data(), window.data() + win_pos, win_end - win_pos);
    win_offset += win_pos;
    win_end -= win_pos;
    win_pos = 0;
    if (window.size() < n) window.resize(n);  // a record longer than the window
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
  pcap_t* open_stream(char* errbuf) {
    probe.stream = true;
    const int in = path == "-" ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw CaptureError(describe_errno(path, errno));
    auto* raw = new StreamCookie;
    raw->fd = in;
    raw->consumed = &consumed;
    FILE* f = stream_file(raw);
    if (!f) throw CaptureError(describe_errno(path, errno));
    std::array<uint8_t, kMagicBytes> head{};
    size_t n = read_head(f, head.data(), head.size());
    StreamCookie* last = nullptr;
    auto give_back = [&](FILE* from, size_t k) {
      auto* c = new StreamCookie;
      c->src = from;
      c->head.assign(head.begin(), head.begin() + ptrdiff_t(k));
      FILE* g = stream_file(c);
      if (!g) throw CaptureError(describe_errno(path, errno));
      last = c;
      return g;
    };
    if (n == 0) {
      std::fclose(f);
      throw CaptureError(fmt::format("{}: empty input", path));
    }
    probe.compression = compression_of(head.data(), n);
    std::string why;
    if (probe.compression != Compression::none) {
      decomp = std::make_shared<DecompressStatus>();
      f = decompressed_file(probe.compression, give_back(f, n), decomp);
      if (!f)
        throw CaptureError(fmt::format("{}: cannot decompress: the {} decoder failed to start", path,
                                       compression_name(probe.compression)));
      n = read_head(f, head.data(), 4);
      why = compressed_capture_error(path, probe.compression, true, head.data(), n, *decomp);
    } else if (format_of(head.data(), n) == FileFormat::unknown) {
      why = not_a_capture(path);
    }
    if (!why.empty() && n >= 4 && wiretap_available()) {
      // Another format: wiretap reads the stream through a pipe, its first bytes first.
      std::string wt_why;
      wt = open_fed(f, std::vector<uint8_t>(head.begin(), head.begin() + ptrdiff_t(n)), feed, wt_why);
      if (wiretap_knows(wt.get(), probe)) {
        probe.is_capture = true;
        return nullptr;
      }
      wt.reset();
      feed.reset();
      throw CaptureError(why);
    }
    if (!why.empty()) {
      std::fclose(f);
      throw CaptureError(why);
    }
    probe.format = format_of(head.data(), n);
    probe.is_capture = true;
    f = give_back(f, n);
    if (probe.format == FileFormat::pcapng && wiretap_available()) {
      recording = last;
      recording->record = &stream_record;
    }
    pcap_t* p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
      std::fclose(f);
      throw CaptureError(fmt::format("{}: not a readable capture: {}", path, errbuf));
    }
    return p;
  }

  uint64_t bytes_done() {
    if (probe.stream) return consumed;
    if (fd >= 0) return win_offset + win_pos;
    if (decomp) return decomp->consumed;
    if (wt) return wt->bytes_read();
    if (!handle) return 0;
    FILE* f = pcap_file(handle->get_pcap_handle());
    const long pos = f ? std::ftell(f) : -1;
    return pos < 0 ? 0 : uint64_t(pos);
  }

  // The one walk over a file's records, for the first pass (only == null: every frame) and the
  // second (only: merged, sorted ranges; the frames outside them are passed over undecoded).
  ReadStats read(ReaderEvents& events, const FrameRanges* only);
};

CaptureReader::CaptureReader(const std::string& path, DecoderChoice decoder)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = nullptr;
  const bool stream = is_stream(path);
  if (!stream) {
    m.probe = probe_file(path);
    if (!m.probe.is_capture) throw CaptureError(m.probe.error);
  }
  m.choice = decoder;
  if (stream) {
    p = m.open_stream(errbuf);
  } else if (m.probe.format == FileFormat::other) {
    m.open_wiretap_file();
  } else if (m.probe.compression != Compression::none) {
    FILE* src = std::fopen(path.c_str(), "rbe");
    if (!src) throw CaptureError(describe_errno(path, errno));
    setvbuf(src, nullptr, _IONBF, 0);  // the decompressor reads large blocks of its own
    posix_fadvise(fileno(src), 0, 0, POSIX_FADV_SEQUENTIAL);
    m.decomp = std::make_shared<DecompressStatus>();
    FILE* fp = decompressed_file(m.probe.compression, src, m.decomp);
    if (!fp)
      throw CaptureError(fmt::format("{}: cannot decompress: the {} decoder failed to start", path,
                                     compression_name(m.probe.compression)));
    p = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
      std::fclose(fp);
      throw CaptureError(fmt::format("{}: not a readable capture: {}", path, errbuf));
    }
  } else {
    // Our own FILE* with a large buffer: the read() system calls were half of the run time.
    FILE* fp = std::fopen(path.c_str(), "rbe");
    if (!fp) throw CaptureError(describe_errno(path, errno));
    setvbuf(fp, nullptr, _IOFBF, kFileBuffer);
    posix_fadvise(fileno(fp), 0, 0, POSIX_FADV_SEQUENTIAL);
    p = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
      std::fclose(fp);
      throw CaptureError(fmt::format("{}: not a readable capture: {}", path, errbuf));
    }
  }
  if (!p) {  // wiretap's: every packet to the decoder of its own link type
    m.probe.reader = CaptureLibrary::wiretap;
    if (!m.wt->decodable()) {
      const int dlt = m.wt->file_dlt();
      throw CaptureError(fmt::format("{}: link type {} is not supported", path,
                                     dlt >= 0 ? dlt_name(dlt) : m.wt->type_name()));
    }
    if (const int dlt = m.wt->file_dlt(); dlt >= 0) Impl::pick_decoder(dlt, decoder, m.decoder);
    return;
  }
  m.probe.reader = CaptureLibrary::libpcap;
  m.handle = std::make_unique<OfflineHandle>(p);
  if (!m.probe.stream && m.probe.compression == Compression::none && m.probe.format == FileFormat::pcap)
    m.try_direct(path);

  m.choose_decoder(decoder, path);
}

std::string live_filter(const LiveCapture& live) {
  std::string f = "tcp";
  if (!live.detect_ports && !live.ports.empty()) {
    f += " and (";
    for (size_t i = 0; i < live.ports.size(); ++i)
      f += fmt::format("{}port {}", i ? " or " : "", live.ports[i]);
    f += ")";
  }
  return live.filter.empty() ? f : "(" + f + ") and (" + live.filter + ")";
}

std::vector<std::string> capture_interfaces() {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_if_t* all = nullptr;
  if (pcap_findalldevs(&all, err) != 0) throw CaptureError(fmt::format("cannot list interfaces: {}", err));
  std::vector<std::string> out;
  size_t n = 0;
  for (pcap_if_t* d = all; d; d = d->next)
    out.push_back(fmt::format("{}. {}{}", ++n, d->name,
                              d->description ? fmt::format(" ({})", d->description) : std::string()));
  pcap_freealldevs(all);
  return out;
}

CaptureReader::CaptureReader(const LiveCapture& live, DecoderChoice decoder)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = "live:" + live.iface;
  m.live = &live;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_create(live.iface.c_str(), errbuf);
  if (!p) throw CaptureError(fmt::format("-i {}: cannot capture: {}", live.iface, errbuf));
  // Every byte of every packet (a BHS can sit anywhere in a segment), a buffer that holds bursts,
  // nanosecond stamps where the interface has them, packets handed on within 100 ms.
  if (pcap_set_snaplen(p, 262144) != 0 || pcap_set_promisc(p, 1) != 0 || pcap_set_timeout(p, 100) != 0 ||
      pcap_set_buffer_size(p, live.buffer_mib * 1024 * 1024) != 0) {
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot set the capture up", live.iface));
  }
  const bool nano = pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO) == 0;  // else microseconds
  const int rc = pcap_activate(p);
  if (rc < 0) {
    const std::string why = rc == PCAP_ERROR ? pcap_geterr(p) : pcap_statustostr(rc);
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot capture: {}{}", live.iface, why,
                                   rc == PCAP_ERROR_PERM_DENIED ? " (run as root or with CAP_NET_RAW)" : ""));
  }
  m.live_warning = rc > 0 ? pcap_statustostr(rc) : "";
  bpf_program prog{};
  const std::string filter = live_filter(live);
  if (pcap_compile(p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 || pcap_setfilter(p, &prog) != 0) {
    const std::string why = pcap_geterr(p);
    pcap_freecode(&prog);
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: filter '{}': {}", live.iface, filter, why));
  }
  pcap_freecode(&prog);
  if (!live.write_path.empty()) {
    m.dump = pcap_dump_open(p, live.write_path.c_str());
    if (!m.dump) {
      const std::string why = pcap_geterr(p);
      pcap_close(p);
      throw CaptureError(fmt::format("-w {}: {}", live.write_path, why));
    }
  }
  m.probe.is_capture = true;
  m.probe.stream = true;
  m.probe.format = FileFormat::live;
  m.live_usec = !nano || pcap_get_tstamp_precision(p) != PCAP_TSTAMP_PRECISION_NANO;
  // Non-blocking, waited on with poll(): libpcap's timeout need not fire while no packet comes,
  // and --duration, --count and Ctrl-C must end the capture anyway.
  m.live_fd = pcap_get_selectable_fd(p);
  if (m.live_fd < 0 || pcap_setnonblock(p, 1, errbuf) != 0) {
    pcap_close(p);
    throw CaptureError(fmt::format("-i {}: cannot wait for packets: {}", live.iface, errbuf));
  }
  m.handle = std::make_unique<OfflineHandle>(p);
  m.choose_decoder(decoder, "-i " + live.iface);
  m.live_start = std::chrono::steady_clock::now();
}

CaptureReader::~CaptureReader() = default;

const FileProbe& CaptureReader::probe() const { return impl_->probe; }

int CaptureReader::link_type() const {
  const Impl& m = *impl_;
  if (!m.wt) return m.handle->link_type();
  return m.wt->file_dlt();
}

std::string_view CaptureReader::decoder_name() const {
  const Impl& m = *impl_;
  if (!m.wt || (!m.used_fast && !m.used_tins)) return m.decoder;
  return m.used_fast && m.used_tins ? "fast+libtins" : m.used_tins ? "libtins" : "fast";
}

std::string CaptureReader::link_type_name() const {
  const Impl& m = *impl_;
  if (!m.wt) return dlt_name(link_type());
  std::string names;
  for (const auto& l : m.links)  // met in packets only
    names += (names.empty() ? "" : ",") + l.name;
  if (names.empty() && m.wt->file_dlt() >= 0) names = dlt_name(m.wt->file_dlt());
  return names;
}

std::string CaptureReader::link_type_description() const {
  const Impl& m = *impl_;
  if (!m.wt) return dlt_description(link_type());
  std::string words;
  for (const auto& l : m.links)
    words += (words.empty() ? "" : ", ") + l.description;
  if (words.empty() && m.wt->file_dlt() >= 0) words = dlt_description(m.wt->file_dlt());
  return words;
}

ReadStats CaptureReader::read_all(ReaderEvents& events) { return impl_->read(events, nullptr); }
void CaptureReader::limit_packets(uint64_t n) { impl_->max_packets = n; }

ReadStats CaptureReader::read_frames(ReaderEvents& events, FrameRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  FrameRanges merged;
  for (const auto& r : ranges)
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  return impl_->read(events, &merged);
}

ReadStats CaptureReader::Impl::read(ReaderEvents& events, const FrameRanges* only) {
  Impl& m = *this;
  pcap_t* p = m.handle ? m.handle->get_pcap_handle() : nullptr;
  ReadStats st;
  Segment seg;
  int shown_truncated = 0, shown_malformed = 0;
  uint64_t first_fragment = 0;
  uint64_t first_odd = 0;  // the first frame whose sub-second field was out of range, and that part
  int64_t first_odd_sub = 0;
  bool at_end = false;
  WiretapRecord wr;

  // The next record from the file, with libpcap's checks and messages (sf-pcap.c).
  pcap_pkthdr record{};
  std::string record_error;
  const auto read_failed = [&]() {
    return m.read_errno ? fmt::format("error reading dump file: {}", std::strerror(m.read_errno)) : "";
  };
  auto next_record = [&](pcap_pkthdr** h, const u_char** data) -> int {
    if (!m.fill(16)) {
      const size_t left = m.win_end - m.win_pos;
      if (m.read_errno) {
        record_error = read_failed();
        return PCAP_ERROR;
      }
      if (left == 0) return PCAP_ERROR_BREAK;
      record_error = fmt::format("truncated dump file; tried to read 16 header bytes, only got {}", left);
      return PCAP_ERROR;
    }
    const uint8_t* r = m.window.data() + m.win_pos;
    const uint32_t frac = m.field32(r + 4), caplen = m.field32(r + 8), len = m.field32(r + 12);
    // libpcap reads a record longer than the snaplen (up to its per-link maximum, 256 KiB for
    // most) and keeps snaplen bytes; longer ones are corrupt.
    if (caplen > m.snaplen && caplen > 262144) {
      record_error =
          fmt::format("invalid packet capture length {}, bigger than snaplen of {}", caplen, m.snaplen);
      return PCAP_ERROR;
    }
    const uint64_t left = m.file_size - std::min(m.file_size, m.win_offset + m.win_pos + 16);
    if (caplen > left || !m.fill(16 + size_t(caplen))) {
      record_error = m.read_errno
                         ? read_failed()
                         : fmt::format("truncated dump file; tried to read {} captured bytes, only got {}",
                                       caplen, std::min(left, uint64_t(m.win_end - m.win_pos - 16)));
      return PCAP_ERROR;
    }
    r = m.window.data() + m.win_pos;  // the window may have moved
    record.ts.tv_sec = time_t(m.field32(r));
    record.ts.tv_usec = suseconds_t(m.nanosecond ? frac : uint64_t(frac) * 1000);  // nanoseconds, as asked
    record.caplen = std::min(caplen, m.snaplen);
    record.len = len;
    *h = &record;
    *data = r + 16;
    m.win_pos += 16 + size_t(caplen);
    return 1;
  };

  // The next record through wiretap: h and data as libpcap gives them, the decoder of its link
  // type (null: not decoded) and its time.
  Link* link = nullptr;
  auto wiretap_record = [&](pcap_pkthdr** h, const u_char** data, DecodeFn& fn, int64_t& t, int64_t& sub,
                            bool& odd) -> int {
    for (;;) {
      const int rc = m.wt->next(wr, record_error);
      if (rc <= 0) return rc == 0 ? PCAP_ERROR_BREAK : PCAP_ERROR;
      link = wr.packet ? &m.link_of(wr.encap, wr.dlt) : nullptr;
      if (m.skip_packets > 0) {  // libpcap handed these on before it gave up
        if (wr.packet) --m.skip_packets;
        continue;
      }
      record.caplen = wr.caplen;
      record.len = wr.len;
      *h = &record;
      *data = wr.data;
      fn = link ? link->decode : nullptr;
      t = wr.has_time ? wr.time_ns : st.last_ns;  // a record without a time: its predecessor's
      odd = wr.odd_time;
      sub = wr.sub_ns;
      return 1;
    }
  };

  size_t range = 0;  // the first of `only` not yet passed
  for (;;) {
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    DecodeFn decode = m.decode;
    int64_t t = 0, sub = 0;
    bool odd = false;
    if (m.live && m.live_done(st.packets)) break;
    if (m.max_packets && st.packets >= m.max_packets) break;
    const int rc = m.wt        ? wiretap_record(&h, &data, decode, t, sub, odd)
                   : m.fd >= 0 ? next_record(&h, &data)
                               : pcap_next_ex(p, &h, &data);
    if (m.live && rc == 0) {  // nothing yet: wait a while for the next packet
      pollfd pfd{m.live_fd, POLLIN, 0};
      ::poll(&pfd, 1, 100);
      continue;
    }
    if (rc != 1) {
      if (rc == PCAP_ERROR_BREAK) {  // end of file
        at_end = true;
        break;
      }
      if (m.wt && m.probe.stream && g_stream_signal) break;  // Ctrl-C met wiretap in its read
      std::string why = m.fd >= 0 || m.wt ? record_error : std::string(pcap_geterr(p));
      // A pcapng interface of another link type: libpcap cannot go on, wiretap can.
      if (!m.wt && why.find("different from the type of the first interface") != std::string::npos &&
          m.switch_to_wiretap(st.packets)) {
        events.on_notice(Notice::Level::info, st.packets,
                         fmt::format("read through wiretap{}: libpcap stopped: {}",
                                     st.packets ? fmt::format(" after frame {}", st.packets) : "", why));
        p = nullptr;
        continue;
      }
      st.damaged = true;
      if (m.wt) m.close_wiretap();  // its feed has ended: what it met can be read
      if (m.decomp && !m.decomp->error.empty()) why = m.decomp->error + "; " + why;
      events.on_notice(Notice::Level::error, st.packets,
                       st.packets == 0
                           ? fmt::format("capture unreadable from its first packet: {}", why)
                           : fmt::format("capture damaged after frame {}: {}; the analysis covers "
                                         "frames 1-{}",
                                         st.packets, why, st.packets));
      break;
    }
    const uint64_t frame = ++st.packets;
    if (m.live) {
      if (m.dump) pcap_dump(reinterpret_cast<u_char*>(m.dump), h, data);
      if (m.live_usec) h->ts.tv_usec *= 1000;
      m.consumed += h->caplen;
    }
    if (frame % kProgressEvery == 0) events.on_progress(frame, m.bytes_done());
    if (!m.wt) {
      // A corrupt pcapng timestamp can exceed int64 nanoseconds: clamp to +-2^62 (year 2116),
      // which keeps every difference the engine takes in range.
      constexpr int64_t kMaxSec = (int64_t(1) << 62) / 1'000'000'000;
      sub = int64_t(h->ts.tv_usec);
      if (sub < 0 || sub >= 1'000'000'000) {
        // A pcap record's sub-second field out of range (>= 10^6 us, >= 10^9 ns). Wireshark
        // (wiretap/libpcap.c) takes microseconds times 1000 in 32 bits and adds that, as a signed
        // number of nanoseconds, to the seconds (0xFFFFFFFF us: 1 us before the second); so do we.
        sub = int64_t(int32_t(uint32_t(uint64_t(sub))));
        odd = true;
      }
      t = std::clamp<int64_t>(int64_t(h->ts.tv_sec), -kMaxSec, kMaxSec) * 1'000'000'000 + sub;
    }
    if (odd && st.odd_times++ == 0) {
      first_odd = frame;
      first_odd_sub = sub;
    }
    if (frame == 1) {
      st.first_ns = t;
      events.on_start(t);
    }
    st.last_ns = t;
    if (only) {
      while (range < only->size() && frame > (*only)[range].second)
        ++range;
      if (range == only->size()) break;            // past the last range: the rest is not needed
      if (frame < (*only)[range].first) continue;  // between ranges: not decoded
    }
    if (!decode) {  // wiretap: an event, or a packet of a link type no decoder knows
      if (link) {
        ++st.undecodable;
        if (!link->warned)
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("packets of link type {} ({}) skipped: no decoder for it", link->name,
                                       link->description));
        link->warned = true;
      }
      continue;
    }
    const uint32_t caplen = h->caplen;
    const Frame f{{data, caplen}, h->len > caplen ? h->len - caplen : 0};
    std::string_view why;
    switch (decode(f, seg, why)) {
      case Decoded::tcp:
        seg.frame = frame;
        seg.time_ns = t;
        ++st.tcp_segments;
        st.tcp_payload_bytes += seg.payload.size();
        if (seg.payload.size() < seg.payload_wire_len && st.snapped++ == 0)
          events.on_notice(Notice::Level::info, frame,
                           fmt::format("packet cut at {} of {} bytes by the capture's snaplen: "
                                       "payload beyond it is missing from the capture",
                                       caplen, h->len));
        events.on_segment(seg);
        if (events.finished()) return st;
        break;
      case Decoded::not_tcp:
        break;
      case Decoded::fragment:
        if (st.fragments++ == 0) {
          first_fragment = frame;
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("{} skipped: IP fragments are not reassembled", why));
        }
        break;
      case Decoded::truncated:
        ++st.truncated;
        if (shown_truncated++ < kPacketNoticesShown)
          events.on_notice(Notice::Level::warning, frame,
                           fmt::format("packet skipped: {} cut short ({} bytes captured)", why, caplen));
        break;
      case Decoded::malformed:
        ++st.malformed;
        if (shown_malformed++ < kPacketNoticesShown)
          events.on_notice(Notice::Level::warning, frame, fmt::format("packet skipped: {}", why));
        break;
    }
  }
  if (m.wt && at_end) m.close_wiretap();
  if (m.probe.stream) m.probe.size = m.consumed;
  if (m.live) {
    if (m.dump) pcap_dump_flush(m.dump);
    if (!m.live_warning.empty()) events.on_notice(Notice::Level::warning, 0, m.live_warning);
    pcap_stat ps{};
    if (pcap_stats(p, &ps) == 0 && (ps.ps_drop || ps.ps_ifdrop))
      events.on_notice(Notice::Level::warning, 0,
                       fmt::format("{} packets dropped by the kernel (its capture buffer was full), {} by "
                                   "the interface: the analysis misses them (a larger --buffer, a narrower "
                                   "--port list, or -w and a later read help)",
                                   ps.ps_drop, ps.ps_ifdrop));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m.live_start).count();
    events.on_notice(
        Notice::Level::info, 0,
        fmt::format("{} packets captured live in {:.1f} s (filter '{}'){}", st.packets, secs,
                    live_filter(*m.live),
                    m.live->write_path.empty() ? "" : fmt::format(", written to {}", m.live->write_path)));
  }
  if (m.probe.stream && g_stream_signal)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("reading stopped by {} after frame {}: the report covers what came before",
                                 g_stream_signal == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM", st.packets));
  if (m.decomp && !st.damaged && !m.decomp->error.empty()) {
    st.damaged = true;
    events.on_notice(Notice::Level::error, st.packets,
                     fmt::format("{} after frame {}", m.decomp->error, st.packets));
  }
  if (m.decomp && !m.decomp->warning.empty()) events.on_notice(Notice::Level::warning, 0, m.decomp->warning);
  if (st.fragments > 1)
    events.on_notice(
        Notice::Level::warning, first_fragment,
        fmt::format("{} IP fragments skipped in all (first at frame {})", st.fragments, first_fragment));
  if (st.truncated > kPacketNoticesShown)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} packets skipped in all because a header was cut short", st.truncated));
  if (st.malformed > kPacketNoticesShown)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} malformed packets skipped in all", st.malformed));
  if (st.undecodable > 1)
    events.on_notice(Notice::Level::warning, 0,
                     fmt::format("{} packets of link types no decoder knows skipped in all", st.undecodable));
  if (st.odd_times) {
    const std::string how = m.probe.format == FileFormat::pcap && m.probe.wiretap_format.empty()
                                ? " (the field, microseconds times 1000, as a signed 32-bit count of nanoseconds)"
                                : "";
    events.on_notice(
        Notice::Level::warning, first_odd,
        st.odd_times == 1
            ? fmt::format("a timestamp's sub-second field is out of range: timed as Wireshark times it, "
                          "{:+.9f} s from its second{}",
                          double(first_odd_sub) / 1e9, how)
            : fmt::format("{} timestamps' sub-second fields are out of range (the first at frame {}): timed "
                          "as Wireshark times them, the first {:+.9f} s from its second{}",
                          st.odd_times, first_odd, double(first_odd_sub) / 1e9, how));
  }
  if (st.packets == 0 && !st.damaged)
    events.on_notice(Notice::Level::warning, 0, "the capture holds no packets");
  events.on_progress(st.packets, m.bytes_done());
  return st;
}

}  // namespace iscsi_doctor::cli
