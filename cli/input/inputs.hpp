// SPDX-License-Identifier: GPL-2.0-or-later
#pragma once

#include <string>
#include <vector>

namespace iscsi_doctor::cli {

// The capture files an input names: the file itself, or every capture under a directory (sorted,
// recursively; files that are not a pcap or pcapng capture, compressed or not, are skipped).
// An input that does not exist is returned as is (reading it reports the error); a directory with
// no capture in it is returned with an error, and so counts as an unusable input.
struct Input {
  std::string path;
  std::string error;  // set: unusable before it is even opened
  bool live = false;  // the live capture (-i); path: "live:IFACE"
};
std::vector<Input> expand_inputs(const std::vector<std::string>& args);

}  // namespace iscsi_doctor::cli
