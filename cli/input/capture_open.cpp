// SPDX-License-Identifier: GPL-2.0-or-later
// libpcap reads the file (pcap and pcapng alike, timestamps scaled to nanoseconds); a compressed
// file is decompressed behind a stdio FILE* (fopencookie, decompress.hpp) that libpcap reads like
// any other. The pcap_t is owned by an OfflineHandle, which closes it. Each packet goes to the
// decoder chosen for the link type (packet_decoder.hpp) and, when it is TCP, to the caller as a
// Segment.
//
// What libpcap cannot read goes through libwiretap (wiretap_reader.hpp), each packet to the decoder
// of its own link type: a format libpcap does not know, from the start; a pcapng whose interfaces
// differ in link type, from where libpcap gives up (it reads the first interface only when it opens
// the file), the frames it already handed on skipped. wiretap opens files by name: a stream, or a
// file we decompress, reaches it through a pipe fed by a thread (PipeFeed), never through the disk.
//
// Here: opening a file or stream, and the reader's accessors.
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

void CaptureReader::Impl::choose_decoder(DecoderChoice c, const std::string& what) {
  choice = c;
  const int dlt = pcap_datalink(handle->get_pcap_handle());
  decode = pick_decoder(dlt, choice, decoder);
  if (!decode)
    throw CaptureError(fmt::format("{}: link type {} ({}) is not supported", what, dlt, dlt_name(dlt)));
}

void CaptureReader::Impl::open_wiretap_file() {
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

CaptureReader::Impl::Link& CaptureReader::Impl::link_of(int key, int dlt) {
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

void CaptureReader::Impl::close_wiretap() {
  wt->close();
  if (feed) feed->finish();
}

bool CaptureReader::Impl::switch_to_wiretap(uint64_t delivered) {
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


void CaptureReader::Impl::try_direct(const std::string& file) {
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
  const uint8_t* head = win;
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

pcap_t* CaptureReader::Impl::open_stream(char* errbuf) {
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
  if (probe.format == FileFormat::pcapng && wiretap_built()) {  // wiretap may be needed: loaded then
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

uint64_t CaptureReader::Impl::bytes_done() {
  if (probe.stream) return consumed;
  if (fd >= 0) return win_offset + win_pos;
  if (decomp) return decomp->consumed;
  if (wt) return wt->bytes_read();
  if (!handle) return 0;
  FILE* f = pcap_file(handle->get_pcap_handle());
  const long pos = f ? std::ftell(f) : -1;
  return pos < 0 ? 0 : uint64_t(pos);
}

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

CaptureReader::~CaptureReader() = default;

const FileProbe& CaptureReader::probe() const { return impl_->probe; }

int CaptureReader::link_type() const {
  const Impl& m = *impl_;
  if (!m.wt) return pcap_datalink(m.handle->get_pcap_handle());
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
void CaptureReader::read_file_ahead() { impl_->read_file_ahead(); }

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

}  // namespace iscsi_doctor::cli
