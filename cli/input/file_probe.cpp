// SPDX-License-Identifier: GPL-2.0-or-later
// What a capture file is, from its first bytes (through the decompressor when compressed; through
// wiretap when neither pcap nor pcapng), and the names and messages that say so.
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

bool wiretap_knows(const WiretapFile* wt, FileProbe& p) {
  if (!wt || !wt->decodable()) return false;
  p.format = FileFormat::other;
  p.wiretap_format = wt->type_name();
  return true;
}
}  // namespace input

#ifndef ISCSI_DOCTOR_WIRETAP
// Built without libwiretap (wiretap_reader.cpp is then empty): what libpcap cannot read is refused.
bool wiretap_built() { return false; }
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

}  // namespace iscsi_doctor::cli
