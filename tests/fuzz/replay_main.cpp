// SPDX-License-Identifier: GPL-2.0-or-later
// Replays fuzz inputs (files or directories of files) through a fuzz target without libFuzzer,
// so any compiler's normal build re-runs the kept seeds and crash inputs (tests/fuzz/regressions/).
// A missing path, an unreadable file or a directory without inputs fails the run: a replay test
// that silently replays nothing would pass forever.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s INPUT|DIR...: no inputs given\n", argv[0]);
    return 2;
  }
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    const auto st = fs::status(argv[i], ec);
    if (ec || !fs::exists(st)) {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
    std::vector<fs::path> files;
    if (fs::is_directory(st)) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
      if (files.empty()) {
        std::fprintf(stderr, "replay: %s: directory holds no input\n", argv[i]);
        return 1;
      }
    } else {
      files.push_back(argv[i]);
    }
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      std::printf("%s\n", p.c_str());  // before running it: a crash names its input
      std::fflush(stdout);
      std::ifstream in(p, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: %s: cannot read\n", p.c_str());
        return 1;
      }
      std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(d.data(), d.size());
      ++n;
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return 0;
}
