// SPDX-License-Identifier: GPL-2.0-or-later
// Wireshark plugin glue: the symbols Wireshark's plugin loader looks up in every plugin
// (plugin_version, plugin_want_major/minor, plugin_register). The dissector itself lives in
// packet-iscsi-doctor.cpp.
#include <epan/proto.h>
#include <ws_version.h>

#include "packet-iscsi-doctor.h"

#ifndef ISCSI_DOCTOR_VERSION
#define ISCSI_DOCTOR_VERSION "0.0.0"
#endif

#define ISCSI_DOCTOR_PUBLIC __attribute__((visibility("default")))

ISCSI_DOCTOR_PUBLIC extern const char plugin_version[];
ISCSI_DOCTOR_PUBLIC extern const int plugin_want_major;
ISCSI_DOCTOR_PUBLIC extern const int plugin_want_minor;
ISCSI_DOCTOR_PUBLIC void plugin_register(void);

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
