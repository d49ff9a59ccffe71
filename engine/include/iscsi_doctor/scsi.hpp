// SPDX-License-Identifier: GPL-2.0-or-later
// SCSI names as every front-end shows them, from the one SCSI table (engine/src/scsi/table.def).
#pragma once

#include <cstdint>
#include <string_view>

namespace iscsi_doctor::scsi {

std::string_view status_name(uint8_t status);  // SAM-5: "GOOD", "CHECK_CONDITION", ...; "" when not known
bool status_known(uint8_t status);
std::string_view sense_key_name(uint8_t key);  // SPC-5: "ILLEGAL_REQUEST", ... (of key & 0x0f)
// T10's name of an ASC/ASCQ pair: "VENDOR SPECIFIC" for ASC 0x80-0xff, "" for a pair not in the table.
std::string_view asc_name(uint8_t asc, uint8_t ascq);

}  // namespace iscsi_doctor::scsi
