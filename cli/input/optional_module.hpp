// SPDX-License-Identifier: GPL-2.0-or-later
// The parts of the CLI whose libraries are loaded only when a run needs them: libwiretap (files
// libpcap cannot read), libtins (link types the fast decoder does not know, --decoder libtins) and
// libiscsi (`probe`). Linked into the binary, they and what they pull in (glib, gnutls, OpenSSL's
// libcrypto, librdmacm, ...) took ~8 ms of every run's start, against ~3 ms for everything else.
// Each is a module of its own, iscsi-doctor-NAME.so, looked for in $ISCSI_DOCTOR_MODULE_DIR, then
// next to the binary (the build tree), then in the install's lib/iscsi-doctor.
#pragma once

#include <string>

namespace iscsi_doctor::cli {

// The module's entry point `symbol`, loaded once per run (thread-safe); null when the module or
// the symbol cannot be loaded, `why` then says why (the same text on every call).
void* optional_module_symbol(const char* name, const char* symbol, std::string& why);

// The same, as the entry point's own function type.
template <typename Fn>
Fn optional_module_entry(const char* name, const char* symbol, std::string& why) {
  return reinterpret_cast<Fn>(optional_module_symbol(name, symbol, why));
}

}  // namespace iscsi_doctor::cli
