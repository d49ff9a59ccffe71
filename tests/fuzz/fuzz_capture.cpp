// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes whole-capture reading: the input is written to a file and read as the CLI reads it
// (probe, libpcap, decompression, both packet decoders) into an Analyzer.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "input/capture_reader.hpp"
#include "iscsi_doctor/analyzer.hpp"

using namespace iscsi_doctor;
using namespace iscsi_doctor::cli;

namespace {

struct Feed : ReaderEvents, Sink {
  Analyzer* analyzer = nullptr;
  void on_segment(const Segment& s) override {
    if (s.payload.size() > 262144 + 65536) __builtin_trap();
    analyzer->feed(s);
  }
  void on_notice(Notice::Level, uint64_t, std::string m) override {
    if (m.empty()) __builtin_trap();
  }
};

const std::string& path() {
  static const std::string p = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/fuzz_capture." + std::to_string(getpid());
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path().c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  for (auto decoder : {DecoderChoice::fast, DecoderChoice::libtins}) {
    try {
      CaptureReader reader(path(), decoder);
      Feed feed;
      Options o;
      o.max_open_commands = 64;
      Analyzer a(o, feed);
      feed.analyzer = &a;
      (void)reader.read_all(feed);
      a.finish();
    } catch (const CaptureError& e) {
      if (!*e.what()) __builtin_trap();
    }
  }
  ::unlink(path().c_str());
  return 0;
}
