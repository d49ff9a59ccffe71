// SPDX-License-Identifier: GPL-2.0-or-later
#include "input/optional_module.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace iscsi_doctor::cli {

namespace {

std::string exe_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string path(buf.data(), size_t(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct Loaded {
  void* handle = nullptr;
  std::string why;
};

Loaded load(const std::string& name) {
  const std::string file = "iscsi-doctor-" + name + ".so";
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("ISCSI_DOCTOR_MODULE_DIR"); d && *d) dirs.push_back(d);
  const std::string exe = exe_dir();
  dirs.push_back(exe);
  dirs.push_back(exe + "/" + ISCSI_DOCTOR_MODULE_RELDIR);
  Loaded l;
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + file;
    if (::access(path.c_str(), F_OK) != 0) continue;
    l.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (l.handle) return l;
    const char* e = ::dlerror();
    l.why = fmt::format("cannot load {}: {}", path, e ? e : "unknown error");
    return l;
  }
  std::string looked;
  for (const std::string& dir : dirs) looked += (looked.empty() ? "" : ", ") + dir;
  l.why = fmt::format("{} not found (looked in {}; ISCSI_DOCTOR_MODULE_DIR names another folder)", file, looked);
  return l;
}

}  // namespace

void* optional_module_symbol(const char* name, const char* symbol, std::string& why) {
  static std::mutex mu;
  static std::map<std::string, Loaded> loaded;
  std::lock_guard lock(mu);
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, load(name)).first;
  Loaded& l = it->second;
  if (l.handle && l.why.empty()) {
    if (void* s = ::dlsym(l.handle, symbol)) return s;
    l.why = fmt::format("iscsi-doctor-{}.so has no {} (a module of another build?)", name, symbol);
  }
  why = l.why;
  return nullptr;
}

}  // namespace iscsi_doctor::cli
