// SPDX-License-Identifier: GPL-2.0-or-later
// Streams (standard input, pipes, FIFOs, and what a decompressor yields) behind a stdio FILE*, and
// the pipe through which wiretap reads what it cannot open by name.
#include <fcntl.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "input/capture_internal.hpp"

namespace iscsi_doctor::cli {
namespace input {
namespace {

void on_stream_signal(int sig) {
  g_stream_signal = sig;
  std::signal(sig, SIG_DFL);  // a second one kills
}

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
}  // namespace

FileFormat format_of(const uint8_t* b, size_t n) {
  if (n < 4) return FileFormat::unknown;
  const uint32_t m = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  for (uint32_t magic : kPcapMagics)
    if (m == magic) return FileFormat::pcap;
  if (m == kPcapngMagic) return FileFormat::pcapng;
  return FileFormat::unknown;
}

volatile sig_atomic_t g_stream_signal = 0;

FILE* stream_file(StreamCookie* c) {
  FILE* f = fopencookie(c, "r", cookie_io_functions_t{stream_read, nullptr, nullptr, stream_close});
  if (!f) {
    stream_close(c);
    return nullptr;
  }
  setvbuf(f, nullptr, _IOFBF, kStreamBuffer);
  return f;
}

size_t read_head(FILE* f, uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t k = std::fread(out + got, 1, n - got, f);
    if (k == 0) break;
    got += k;
  }
  return got;
}

PipeFeed::PipeFeed(FILE* src, std::vector<uint8_t> prefix) {
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

PipeFeed::~PipeFeed() {
  opened();
  if (!thread_.joinable()) return;
  // A stream stopped by a signal may block its reader for ever: let it go with the process.
  if (g_stream_signal)
    thread_.detach();
  else
    thread_.join();
}

std::unique_ptr<WiretapFile> open_fed(FILE* src, std::vector<uint8_t> prefix, std::unique_ptr<PipeFeed>& feed,
                                      std::string& error) {
  feed = std::make_unique<PipeFeed>(src, std::move(prefix));
  auto wt = WiretapFile::open(feed->path(), error);
  feed->opened();
  if (!wt) feed.reset();
  return wt;
}
}  // namespace input

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

}  // namespace iscsi_doctor::cli
