// SPDX-License-Identifier: GPL-2.0-or-later
// The module iscsi-doctor-libiscsi.so: libiscsi's functions that probe.cpp calls (libiscsi.hpp).
#include "commands/libiscsi.hpp"

namespace {
constexpr iscsi_doctor::cli::Libiscsi kLibiscsi{
#define ISCSI_DOCTOR_LIBISCSI_ADDRESS(f) &::f,
    ISCSI_DOCTOR_LIBISCSI_FUNCTIONS(ISCSI_DOCTOR_LIBISCSI_ADDRESS)
#undef ISCSI_DOCTOR_LIBISCSI_ADDRESS
};
}  // namespace

extern "C" __attribute__((visibility("default"))) const iscsi_doctor::cli::Libiscsi* iscsi_doctor_libiscsi_v1() {
  return &kLibiscsi;
}
