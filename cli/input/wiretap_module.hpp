// SPDX-License-Identifier: GPL-2.0-or-later
// What iscsi-doctor-wiretap.so (wiretap_reader.cpp, linked with libwiretap) gives the binary
// (wiretap_file.cpp, the WiretapFile it hands on): a table of functions, by one C symbol whose
// name carries the table's version, so a module of another build is refused, not misread.
#pragma once

#include <cstdint>
#include <string>

#include "input/wiretap_reader.hpp"

namespace iscsi_doctor::cli {

struct WiretapModule {
  // An open file; null, with `error`, when wiretap does not know it.
  void* (*open)(const std::string& path, std::string& error);
  void (*free)(void* file);
  int (*next)(void* file, WiretapRecord& out, std::string& error);
  void (*close)(void* file);
  std::string (*type_name)(const void* file);
  int (*file_dlt)(const void* file);
  bool (*decodable)(const void* file);
  uint64_t (*bytes_read)(const void* file);
  std::string (*encap_name)(int encap);
  std::string (*encap_description)(int encap);
};

}  // namespace iscsi_doctor::cli

#define ISCSI_DOCTOR_WIRETAP_MODULE "iscsi_doctor_wiretap_module_v1"
