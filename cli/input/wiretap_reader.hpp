// SPDX-License-Identifier: GPL-2.0-or-later
// Capture files through libwiretap, Wireshark's own capture-file library: what libpcap cannot read
// (a pcapng whose interfaces differ in link type; snoop, ERF, Network Monitor, ...), record by
// record, each packet with its own link type. The binary reaches wiretap through the module
// iscsi-doctor-wiretap.so (wiretap_reader.cpp, the only file that sees wiretap's and glib's headers;
// wiretap_file.cpp loads it when a run first needs it). Built when libwireshark-dev is installed
// (ISCSI_DOCTOR_WIRETAP); without it, or without its module, wiretap_available() is false and open
// fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace iscsi_doctor::cli {

bool wiretap_built();      // built with wiretap (ISCSI_DOCTOR_WIRETAP): its module may be loaded
bool wiretap_available();  // its module loaded (the first call loads it; a warning says if it cannot)
std::string wiretap_version();  // "4.0.17" (the headers built against), "" without wiretap

// One record as wiretap read it.
struct WiretapRecord {
  bool packet = false;    // a packet (else an event, a log entry, ...: numbered as a frame, not decoded)
  bool has_time = false;  // the record has a timestamp
  bool odd_time = false;  // its sub-second part is outside 0..999,999,999 ns (taken as Wireshark takes it)
  int64_t time_ns = 0;
  int64_t sub_ns = 0;  // the sub-second part as wiretap gave it (may be negative, or 10^9 and more)
  uint32_t caplen = 0, len = 0;
  const uint8_t* data = nullptr;  // caplen bytes, valid until the next read
  int dlt = -1;  // the libpcap link type its bytes are (DLT_*), -1 when none we decode
  int encap = 0;  // wiretap's encapsulation (WTAP_ENCAP_*), or -(ERF type) - 1000 for an ERF record
};

class WiretapFile {
public:
  // Opens a regular file or a FIFO (read once, front to back). Null, with `error`, when wiretap
  // does not know the file.
  static std::unique_ptr<WiretapFile> open(const std::string& path, std::string& error);
  ~WiretapFile();
  WiretapFile(const WiretapFile&) = delete;
  WiretapFile& operator=(const WiretapFile&) = delete;

  // 1: a record; 0: the end of the file (or closed); -1: an error (`error` says which).
  int next(WiretapRecord& out, std::string& error);
  // Closes the file (its descriptor: a pipe's writer sees it closed); the rest still answers.
  void close();
  std::string type_name() const;  // wiretap's short name: "pcapng", "snoop", "erf", "netmon2", ...
  // The file's one link type as a DLT (-1: per packet, or one we do not decode), and whether its
  // packets can be decoded at all (a link type we know, per packet, or ERF).
  int file_dlt() const;
  bool decodable() const;
  uint64_t bytes_read() const;  // of the file (as stored: compressed bytes when wiretap decompresses)

  // Names of a record's link type (WiretapRecord::encap) for one we have no DLT for.
  static std::string encap_name(int encap);
  static std::string encap_description(int encap);

private:
  struct Impl;
  explicit WiretapFile(std::unique_ptr<Impl>);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iscsi_doctor::cli
