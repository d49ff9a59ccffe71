// SPDX-License-Identifier: GPL-2.0-or-later
// Wireshark plugin glue: the symbols Wireshark's plugin loader looks up in every plugin
// (plugin_version, plugin_want_major/minor, plugin_register, and in 4.4+ plugin_describe).
// The dissector itself: packet-iscsi-doctor.cpp and the files iscsi-doctor.hpp names.
#include <epan/proto.h>
#include <ws_version.h>
// 4.0 installs no wsutil/plugins.h; 4.4+ declare plugin_describe()'s flags there.
#if __has_include(<wsutil/plugins.h>)
#include <wsutil/plugins.h>
#endif

#include "packet-iscsi-doctor.h"

#ifndef ISCSI_DOCTOR_VERSION
#define ISCSI_DOCTOR_VERSION "0.0.0"
#endif

#define ISCSI_DOCTOR_PUBLIC __attribute__((visibility("default")))

ISCSI_DOCTOR_PUBLIC extern const char plugin_version[];
ISCSI_DOCTOR_PUBLIC extern const int plugin_want_major;
ISCSI_DOCTOR_PUBLIC extern const int plugin_want_minor;
ISCSI_DOCTOR_PUBLIC void plugin_register(void);
#ifdef WS_PLUGIN_DESC_DISSECTOR
ISCSI_DOCTOR_PUBLIC uint32_t plugin_describe(void);
#endif

const char plugin_version[] = ISCSI_DOCTOR_VERSION;
// Wireshark loads a plugin only into the major.minor release whose headers built it.
const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
const int plugin_want_minor = WIRESHARK_VERSION_MINOR;

void plugin_register(void) {
  static proto_plugin plug;
  plug.register_protoinfo = proto_register_iscsi_doctor;
  plug.register_handoff = proto_reg_handoff_iscsi_doctor;
  proto_register_plugin(&plug);
}

#ifdef WS_PLUGIN_DESC_DISSECTOR
// Newer loaders warn about (and may skip) a plugin that does not say what it is.
uint32_t plugin_describe(void) { return WS_PLUGIN_DESC_DISSECTOR; }
#endif
