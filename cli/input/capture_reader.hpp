// SPDX-License-Identifier: GPL-2.0-or-later
// Capture files in, TCP Segments out: pcap and pcapng read by libpcap, and what libpcap cannot read
// (a pcapng whose interfaces differ in link type; snoop, ERF, Network Monitor and the other formats
// Wireshark opens) by libwiretap (wiretap_reader.hpp), each packet decoded by its own link type; any
// of them compressed with gzip, xz, zstd, lz4 or bzip2 (detected by magic, decompressed on the fly:
// decompress.hpp), every link type one of the decoders knows (packet_decoder.hpp). Frames are
// numbered from 1 over every packet in the file, as Wireshark numbers them; timestamps are read at
// nanosecond precision.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "input/decompress.hpp"
#include "iscsi_doctor/results.hpp"
#include "iscsi_doctor/segment.hpp"

namespace iscsi_doctor::cli {

// live: -i, read from the interface; other: a format only wiretap reads (FileProbe::wiretap_format)
enum class FileFormat : uint8_t { unknown, pcap, pcapng, live, other };
// Which library read the packets: libpcap (with our own walk over uncompressed pcap records), or
// libwiretap for what libpcap cannot read.
enum class CaptureLibrary : uint8_t { none, libpcap, wiretap };

// What the first bytes of a file say (looked at through the decompressor when it is compressed).
struct FileProbe {
  bool is_capture = false;  // pcap, pcapng or a format wiretap reads, possibly compressed
  Compression compression = Compression::none;
  bool stream = false;  // standard input ("-"), a pipe, a FIFO: read once, as it comes
  FileFormat format = FileFormat::unknown;
  uint64_t size = 0;  // on disk; of a stream, the bytes read from it (once read)
  std::string error;  // set when !is_capture: "cannot open: ...", "empty file", ...
  std::string wiretap_format;  // of FileFormat::other: wiretap's name ("snoop", "erf", "netmon2", ...)
  CaptureLibrary reader = CaptureLibrary::none;  // set once a CaptureReader has it open (or has read it)
};
// Of a regular file only (a stream's first bytes can be looked at once: CaptureReader does).
FileProbe probe_file(const std::string& path);
// "-" (standard input) or anything that is neither a regular file nor a directory: a pipe, a
// FIFO, /dev/stdin. Read as a stream: once, front to back, nothing seeked.
bool is_stream(const std::string& path);
// While a stream is read: Ctrl-C (SIGINT) or SIGTERM ends it as if it had ended there, so that
// `tcpdump ... | iscsi-doctor -` stopped with Ctrl-C still reports; a second signal kills as usual.
void end_streams_on_signal();
// Copies a stream to a new temporary file (for reports that read a capture twice) and returns
// its path; the caller removes it. Throws CaptureError naming `path` when it cannot.
std::string copy_stream_to_temporary(const std::string& path);
std::string_view format_name(FileFormat);
std::string_view format_name(const FileProbe&);  // wiretap's name for FileFormat::other
std::string_view reader_name(CaptureLibrary);    // "libpcap", "wiretap"

// A file that cannot be read as a capture at all (missing, not a capture, unknown link type).
class CaptureError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class DecoderChoice : uint8_t { fast, libtins };

// A live capture with libpcap (-i): what to capture and when to stop (Ctrl-C or SIGTERM always).
struct LiveCapture {
  std::string iface;
  std::vector<uint16_t> ports{3260};  // the BPF filter's (every TCP port when detect_ports)
  bool detect_ports = true;
  double duration_s = 0;   // 0: until stopped
  uint64_t count = 0;      // packets; 0: until stopped
  std::string write_path;  // -w: every packet captured is kept in this pcap file too
  int buffer_mib = 64;     // the kernel's capture buffer: too small a one drops packets
  std::string filter;      // -f: a BPF capture filter of the user's, and-ed with ours
};
// The interfaces libpcap can capture on, as tshark -D lists them ("1. eth0 (description)"); throws
// CaptureError when libpcap cannot list them.
std::vector<std::string> capture_interfaces();
// The BPF filter a live capture uses: TCP on the iSCSI ports, or all TCP when other ports are
// detected (a connection's port is known only from its traffic); and the user's -f filter.
std::string live_filter(const LiveCapture&);

class ReaderEvents {
public:
  virtual ~ReaderEvents() = default;
  // A TCP segment; its payload span is valid only during the call.
  virtual void on_segment(const Segment&) = 0;
  // A problem with the file or a packet (frame 0: the file as a whole).
  virtual void on_notice(Notice::Level, uint64_t frame, std::string message) = 0;
  // Called every few thousand packets: bytes of the file consumed so far (compressed bytes when compressed).
  virtual void on_progress(uint64_t /*packets*/, uint64_t /*bytes_done*/) {}
  // The first packet's time (nanoseconds), before any segment: where the capture starts.
  virtual void on_start(int64_t /*time_ns*/) {}
  // Asked after each segment: true stops the read there (a second pass that has all it needs).
  virtual bool finished() const { return false; }
};

// Frames by number, as inclusive [first, last] ranges, in any order, overlapping or not.
using FrameRanges = std::vector<std::pair<uint64_t, uint64_t>>;

struct ReadStats {
  uint64_t packets = 0;       // every packet in the file (the last frame number)
  uint64_t tcp_segments = 0;  // handed to on_segment
  uint64_t tcp_payload_bytes = 0;  // their payload as captured (what a snaplen kept)
  uint64_t fragments = 0, truncated = 0, malformed = 0, snapped = 0;
  uint64_t undecodable = 0;  // packets of a link type no decoder knows (a file wiretap read)
  uint64_t odd_times = 0;    // records whose sub-second timestamp field was out of range
  int64_t first_ns = 0, last_ns = 0;
  bool damaged = false;  // reading stopped before the end on a file error
};

class CaptureReader {
public:
  // Opens the file; throws CaptureError (whose message names the file) when it is unusable.
  CaptureReader(const std::string& path, DecoderChoice decoder);
  // Opens a live capture; throws CaptureError (naming the interface) when it cannot start.
  CaptureReader(const LiveCapture& live, DecoderChoice decoder);
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  const FileProbe& probe() const;
  int link_type() const;
  // Of a file wiretap read, the link types of its packets so far, comma-separated (after read_all:
  // all of them), in the order first seen.
  std::string link_type_name() const;         // "EN10MB", "LINUX_SLL2", "EN10MB,LINUX_SLL", ...
  std::string link_type_description() const;  // "Ethernet", "Linux cooked v2", ...
  std::string_view decoder_name() const;      // "fast", "libtins", or "fast+libtins" (several link types)

  // Reads every packet once, in file order. A file error part-way (truncated record, corrupt
  // compressed data) ends the read with stats.damaged and an error notice naming the last good frame.
  ReadStats read_all(ReaderEvents& events);
  // -c N on a file (tshark's habit): read_all stops after N packets (frames 1..N); 0: no limit.
  void limit_packets(uint64_t n);
  // An uncompressed pcap file is read on a thread of its own from here on (the file's bytes, not
  // its packets: input/file_read_ahead.hpp); nothing for other inputs.
  void read_file_ahead();
  // A second pass (ladders): the same walk over the same records, with the same validity rules
  // and frame numbers, but only the frames in `ranges` are decoded and handed on; reading stops
  // after the last of them. On an uncompressed pcap the records in between cost only their header.
  ReadStats read_frames(ReaderEvents& events, FrameRanges ranges);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace iscsi_doctor::cli
