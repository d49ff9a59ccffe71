// SPDX-License-Identifier: GPL-2.0-or-later
// libiscsi for `probe`, reached through the module iscsi-doctor-libiscsi.so (libiscsi_module.cpp,
// linked with libiscsi) so that only `probe` loads it and what it pulls in (librdmacm, libibverbs,
// libnl: ~1 ms of every start otherwise; input/optional_module.hpp). The functions probe.cpp calls,
// each with libiscsi's own type.
#pragma once

#include <string>

// Last: libiscsi 1.20's scsi-lowlevel.h defines a static_assert macro (for C), which would break
// every C++ header after it.
extern "C" {
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
}
#undef static_assert

#define ISCSI_DOCTOR_LIBISCSI_FUNCTIONS(X)                                                          \
  X(iscsi_create_context) X(iscsi_destroy_context) X(iscsi_parse_full_url) X(iscsi_destroy_url)   \
  X(iscsi_set_targetname) X(iscsi_set_session_type) X(iscsi_set_initiator_username_pwd)           \
  X(iscsi_set_timeout) X(iscsi_get_error) X(iscsi_get_fd) X(iscsi_which_events) X(iscsi_service)  \
  X(iscsi_connect_async) X(iscsi_login_async) X(iscsi_logout_sync)                               \
  X(iscsi_disconnect) X(iscsi_testunitready_task) X(iscsi_read16_task) X(iscsi_write16_task)      \
  X(iscsi_readcapacity10_sync) X(iscsi_readcapacity16_sync) X(scsi_datain_unmarshall)             \
  X(scsi_free_scsi_task)

namespace iscsi_doctor::cli {

struct Libiscsi {
#define ISCSI_DOCTOR_LIBISCSI_MEMBER(f) decltype(&::f) f;
  ISCSI_DOCTOR_LIBISCSI_FUNCTIONS(ISCSI_DOCTOR_LIBISCSI_MEMBER)
#undef ISCSI_DOCTOR_LIBISCSI_MEMBER
};

// Loaded at the first call; null, with `why`, when its module cannot be loaded.
const Libiscsi* libiscsi(std::string& why);

}  // namespace iscsi_doctor::cli

#define ISCSI_DOCTOR_LIBISCSI_MODULE "iscsi_doctor_libiscsi_v1"
