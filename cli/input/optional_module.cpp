// SPDX-License-Identifier: GPL-2.0-or-later
#include "input/optional_module.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace iscsi_doctor::cli {

namespace {

// The binary's folder: /proc/self/exe, else the path it was started by (no /proc in a chroot);
// empty when neither names one (never the working directory: a module is code).
std::string exe_dir() {
  std::vector<char> buf(PATH_MAX);  // realpath's size
  std::string path;
  if (const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1); n > 0)
    path.assign(buf.data(), size_t(n));
  else if (const auto* fn = reinterpret_cast<const char*>(::getauxval(AT_EXECFN)); fn && ::realpath(fn, buf.data()))
    path = buf.data();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

struct Loaded {
  void* handle = nullptr;
  std::string why;
};

Loaded load(const std::string& name) {
  const std::string file = "iscsi-doctor-" + name + ".so";
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("ISCSI_DOCTOR_MODULE_DIR"); d && *d) dirs.push_back(d);
  if (const std::string exe = exe_dir(); !exe.empty()) {
    dirs.push_back(exe);
    dirs.push_back(exe + "/" + ISCSI_DOCTOR_MODULE_RELDIR);
  }
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
