// SPDX-License-Identifier: GPL-2.0-or-later
// Replays fuzz inputs (files or directories of files) through a fuzz target without libFuzzer,
// so any compiler's normal build re-runs the kept crash inputs (tests/fuzz/regressions/).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files;
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(argv[i]);
    }
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      std::ifstream in(p, std::ios::binary);
      std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(d.data(), d.size());
      ++n;
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return 0;
}
