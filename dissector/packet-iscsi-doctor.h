// SPDX-License-Identifier: GPL-2.0-or-later
// The two registration entry points of the iscsi_doctor post-dissector, called by plugin.c.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

void proto_register_iscsi_doctor(void);
void proto_reg_handoff_iscsi_doctor(void);

#ifdef __cplusplus
}
#endif
