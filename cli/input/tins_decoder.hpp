// SPDX-License-Identifier: GPL-2.0-or-later
// The libtins decoder (tins_decoder.cpp): the link types the engine's fast decoder does not know
// (802.11, radiotap, PPI, PKTAP), and `--decoder libtins`, the cross-check of the fast one. Both
// share the engine's interface (net/packet_decoder.hpp), whose names the CLI uses as its own.
#pragma once

#include "net/packet_decoder.hpp"

namespace iscsi_doctor::cli {

using net::Decoded;
using net::DecodeFn;
using net::fast_decoder;
using net::Frame;

// The libtins decoder for a link type, or nullptr when libtins does not know it either.
DecodeFn tins_decoder(int dlt);

}  // namespace iscsi_doctor::cli

// The entry point of iscsi-doctor-tins.so (tins_decoder.cpp): tins_decoder() itself; the name
// carries the version of its interface (net::DecodeFn).
#define ISCSI_DOCTOR_TINS_MODULE "iscsi_doctor_tins_decoder_v1"
