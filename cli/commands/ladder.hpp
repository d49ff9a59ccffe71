// SPDX-License-Identifier: GPL-2.0-or-later
// Ladder diagrams: one command's packet exchange over time, initiator and target as two vertical
// lines, the capture point between them, each TCP segment an arrow. The first pass (the normal
// analysis) picks the commands; a second pass over the file (collect_ladders) keeps only the
// segments of their connections around their frames, so memory stays bounded by the number of
// diagrams, not by the capture.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "input/capture_reader.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/results.hpp"

namespace CLI {
class App;
}

namespace iscsi_doctor::cli {

// One segment as drawn.
struct LadderSeg {
  uint64_t frame = 0;
  int64_t time_ns = 0;
  bool from_initiator = false;
  uint32_t seq = 0, ack = 0, len = 0;  // len: TCP payload bytes on the wire
  uint8_t flags = 0;
  uint16_t window = 0;
  std::string label;  // PDUs starting in it ("Data-In + SCSI Rsp"), or "ACK", "SYN", ...
  bool ours = false;  // carries bytes of the drawn command's PDUs
  bool retransmission = false;
  int half_trips = -1;  // the drawn command's half trips after this segment (engine; -1: not its event)
  uint64_t elided_before = 0;  // segments of the connection left out just before this one
};

// A command to draw, with what the first pass knew about it; collect_ladders fills `segs`.
// Findings of a command whose evidence frames its ladder always draws: a transfer held flight after
// flight (a slow link, a small window) has one per flight, and all of them would make the ladder as
// tall as the transfer; the others' frames may be elided with the other segments, and it says so.
inline constexpr size_t kLadderEvidenceFindings = 6;

struct LadderRequest {
  CommandResult command;
  std::vector<Finding> findings;  // the findings tied to this command
  ConnectionInfo conn;            // peers, RTTs, vantage, digests
  std::vector<LadderSeg> segs;
  uint64_t elided_after = 0;  // segments left out at the end (still open command)
  size_t findings_not_drawn = 0;  // findings past kLadderEvidenceFindings, whose evidence may be elided
};

// Second pass: reads `path` and fills each request's segments (those of its connection from just
// before its first frame to just after its status frame; long transfers keep their head, tail
// and evidence frames). The file is walked as the first pass walked it (same records, frame
// numbers and validity rules) up to the last frame any request needs; the requests' connections,
// and only those, are analysed again with `options` (the first pass's), and what the engine made
// of each kept segment (the PDUs begun in it, the drawn command's events and half trips, resends)
// is what the diagram shows.
void collect_ladders(const std::string& path, DecoderChoice decoder, const Options& options,
                     std::vector<LadderRequest*> requests);

// The diagram as an <svg> element (standalone: with the XML namespace and a white background, for
// a file of its own). Element ids start with `id_prefix`; each arrow is a <g> with data-frame
// and data-role: held, release, small (the earlier segment the release acknowledged),
// retransmission, original, command (the drawn command's PDUs), other (other commands'), ack.
std::string render_ladder(const LadderRequest& r, std::string_view id_prefix, bool standalone);

// Adds the subcommand `ladder` and its options to `app`; the function returned runs it, once the
// command line is parsed with it chosen: the pipeline (analyse.hpp) with the ladder report
// (make_ladder_report). It returns the exit code.
std::function<int()> add_ladder_command(CLI::App& app);

}  // namespace iscsi_doctor::cli
