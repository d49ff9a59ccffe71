// SPDX-License-Identifier: GPL-2.0-or-later
// libpcap's link-type numbers, with the ones an older <pcap/dlt.h> lacks.
#pragma once

#include <pcap/dlt.h>

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif
#ifndef DLT_IPV4
#define DLT_IPV4 228
#endif
#ifndef DLT_IPV6
#define DLT_IPV6 229
#endif
#ifndef DLT_PKTAP
#define DLT_PKTAP 258
#endif
