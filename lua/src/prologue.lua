-- SPDX-License-Identifier: GPL-2.0-or-later
--
-- iscsi-doctor for Wireshark, in Lua: a post-dissector that explains, per SCSI command, why it
-- was slow (Nagle holds, delayed ACKs, R2T round trips, window holds, retransmissions, target
-- think time, a serialized queue), with the same rules as the C++ engine (docs/rules.md).
--
-- Install: copy this file to ~/.local/lib/wireshark/plugins/ (or run Wireshark/tshark with
-- -X lua_script:lua/iscsi_doctor.lua). See lua/README.md.
--
-- Structure: an analysis core that knows nothing about Wireshark (segments in, commands and
-- findings out), a port of the C++ engine unit by unit (lua/src/<engine path>.lua ports
-- engine/src/<engine path>.cpp; lua/README.md maps each part to its C++ files), then the
-- Wireshark glue at the end (lua/src/wireshark.lua).
-- Lua 5.1-5.4: no integer division, no goto, no bit operators (bit32/bit only, for CRC32C).

local VERSION = "0.1.0"
