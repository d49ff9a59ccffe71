// SPDX-License-Identifier: GPL-2.0-or-later
// WiretapFile over the module iscsi-doctor-wiretap.so (wiretap_reader.cpp), loaded when a run first
// needs wiretap. Without ISCSI_DOCTOR_WIRETAP this file is empty and file_probe.cpp holds the
// stand-ins (so that what compiles the capture reading alone, as tests/fuzz does, links).
#include "input/wiretap_reader.hpp"

#ifdef ISCSI_DOCTOR_WIRETAP
#include <cstdio>

#include "input/optional_module.hpp"
#include "input/wiretap_module.hpp"

namespace iscsi_doctor::cli {

namespace {
const WiretapModule* module() {
  static const WiretapModule* m = [] {
    std::string why;
    const auto entry =
        optional_module_entry<const WiretapModule* (*)()>("wiretap", ISCSI_DOCTOR_WIRETAP_MODULE, why);
    // Said once: the files libpcap cannot read are then refused as if built without wiretap.
    if (!entry) std::fprintf(stderr, "iscsi-doctor: warning: libwiretap not available: %s\n", why.c_str());
    return entry ? entry() : nullptr;
  }();
  return m;
}
}  // namespace

bool wiretap_built() { return true; }
bool wiretap_available() { return module() != nullptr; }
std::string wiretap_version() { return ISCSI_DOCTOR_WIRETAP_VERSION; }

struct WiretapFile::Impl {
  const WiretapModule* m;
  void* file;
  ~Impl() { m->free(file); }
};

WiretapFile::WiretapFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WiretapFile::~WiretapFile() = default;

std::unique_ptr<WiretapFile> WiretapFile::open(const std::string& path, std::string& error) {
  const WiretapModule* m = module();
  if (!m) {
    error = "libwiretap not available";
    return nullptr;
  }
  void* file = m->open(path, error);
  if (!file) return nullptr;
  return std::unique_ptr<WiretapFile>(new WiretapFile(std::unique_ptr<Impl>(new Impl{m, file})));
}

int WiretapFile::next(WiretapRecord& out, std::string& error) { return impl_->m->next(impl_->file, out, error); }
void WiretapFile::close() { impl_->m->close(impl_->file); }
std::string WiretapFile::type_name() const { return impl_->m->type_name(impl_->file); }
int WiretapFile::file_dlt() const { return impl_->m->file_dlt(impl_->file); }
bool WiretapFile::decodable() const { return impl_->m->decodable(impl_->file); }
uint64_t WiretapFile::bytes_read() const { return impl_->m->bytes_read(impl_->file); }

// Only asked of records a module read: it is loaded.
std::string WiretapFile::encap_name(int encap) { return module()->encap_name(encap); }
std::string WiretapFile::encap_description(int encap) { return module()->encap_description(encap); }

}  // namespace iscsi_doctor::cli
#endif
