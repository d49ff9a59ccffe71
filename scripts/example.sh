#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Fresh machine to first answer: installs dependencies, builds, and runs iscsi-doctor on a bundled
# capture of the study's classic case (a target whose SCSI Response is held by Nagle).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
capture=${1:-captures/fixtures/scripted-nagle-read-1k--initiator.pcap.gz}
exec build/cli/iscsi-doctor "$capture"
