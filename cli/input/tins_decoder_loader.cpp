// SPDX-License-Identifier: GPL-2.0-or-later
// tins_decoder() in the binary: the module iscsi-doctor-tins.so (tins_decoder.cpp, linked with
// libtins and, through it, OpenSSL's libcrypto) is loaded when a run first asks for it.
#include <cstdio>

#include "input/optional_module.hpp"
#include "input/tins_decoder.hpp"

namespace iscsi_doctor::cli {

DecodeFn tins_decoder(int dlt) {
  using Entry = DecodeFn (*)(int);
  static const Entry entry = [] {
    std::string why;
    const auto e = optional_module_entry<Entry>("tins", ISCSI_DOCTOR_TINS_MODULE, why);
    // Said once: the link types only libtins decodes are then not decoded (each is named).
    if (!e) std::fprintf(stderr, "iscsi-doctor: warning: libtins not available: %s\n", why.c_str());
    return e;
  }();
  return entry ? entry(dlt) : nullptr;
}

}  // namespace iscsi_doctor::cli
