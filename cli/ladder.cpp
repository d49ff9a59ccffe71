// SPDX-License-Identifier: GPL-2.0-or-later
// Ladder diagrams: the second pass that gathers one command's segments, the SVG drawing, and the
// `iscsi-doctor ladder` subcommand.
#include "ladder.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "formatting.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "pipeline.hpp"
#include "svg.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;
using svg::num;

constexpr size_t kBefore = 2;  // segments of the connection shown before the command
constexpr size_t kAfter = 2;   // and after its status (the status' ACK, usually)
constexpr int64_t kAfterNs = 200'000'000;
constexpr size_t kHead = 30;  // a long transfer keeps its first and last segments and evidence
constexpr size_t kTail = 30;

// ---- iSCSI PDU labels: a minimal framer per direction ------------------------------------------
// Only to name the PDUs an arrow carries; the engine did the real framing in the first pass.

std::string_view opcode_name(uint8_t op) {
  switch (op) {
    case 0x00:
      return "NOP-Out";
    case 0x01:
      return "SCSI Cmd";
    case 0x02:
      return "Task Mgmt";
    case 0x03:
      return "Login";
    case 0x04:
      return "Text";
    case 0x05:
      return "Data-Out";
    case 0x06:
      return "Logout";
    case 0x10:
      return "SNACK";
    case 0x20:
      return "NOP-In";
    case 0x21:
      return "SCSI Rsp";
    case 0x22:
      return "Task Mgmt Rsp";
    case 0x23:
      return "Login Rsp";
    case 0x24:
      return "Text Rsp";
    case 0x25:
      return "Data-In";
    case 0x26:
      return "Logout Rsp";
    case 0x31:
      return "R2T";
    case 0x32:
      return "Async";
    case 0x3f:
      return "Reject";
    default:
      return {};
  }
}

bool opcode_from(bool initiator, uint8_t op) { return initiator ? op < 0x20 : op >= 0x20; }

struct Framer {
  bool synced = false;
  uint32_t next = 0;      // sequence number of the next BHS
  bool cur_ours = false;  // the PDU in progress belongs to the drawn command
  bool have_end = false;
  uint32_t end = 0;  // highest sequence number seen (to tell retransmissions)
};

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Names the PDUs starting in `seg` and whether any of its bytes belong to command `itt`.
void label_segment(Framer& f, const Segment& seg, bool from_initiator, uint32_t itt, bool hd, bool dd,
                   LadderSeg& out) {
  const uint32_t len = seg.payload_wire_len;
  if (len == 0) {
    if (seg.flags & tcp_flag::syn)
      out.label = seg.flags & tcp_flag::ack ? "SYN-ACK" : "SYN";
    else if (seg.flags & tcp_flag::fin)
      out.label = "FIN";
    else if (seg.flags & tcp_flag::rst)
      out.label = "RST";
    else
      out.label = "ACK";
    return;
  }
  const uint32_t seg_end = seg.seq + len;
  if (f.have_end && int32_t(seg_end - f.end) <= 0) {
    out.label = "retransmission";
    out.retransmission = true;
    return;
  }
  f.have_end = true;
  f.end = seg_end;
  const auto& p = seg.payload;
  auto plausible = [&](size_t off) {
    if (off + 48 > p.size()) return false;
    const uint8_t op = p[off] & 0x3f;
    return !opcode_name(op).empty() && opcode_from(from_initiator, op) && p[off + 4] <= 16;
  };
  if (f.synced && int32_t(f.next - seg.seq) < 0) f.synced = false;  // bytes missing: resync
  if (!f.synced) {
    if (!plausible(0)) return;
    f.synced = true;
    f.next = seg.seq;
  }
  std::string label;
  bool ours = false;
  uint32_t off = f.next - seg.seq;
  if (off > 0) ours = f.cur_ours;  // continuation of the PDU in progress
  while (off < len) {
    if (!plausible(off)) {  // cut by the snaplen, or not a BHS after all
      f.synced = false;
      break;
    }
    const uint8_t* b = p.data() + off;
    const uint8_t op = b[0] & 0x3f;
    const uint32_t dlen = uint32_t(b[5]) << 16 | uint32_t(b[6]) << 8 | b[7];
    const uint32_t pdu = 48 + uint32_t(b[4]) * 4 + (hd ? 4 : 0) + ((dlen + 3) & ~3u) + (dlen && dd ? 4 : 0);
    f.cur_ours = be32(b + 16) == itt && op != 0x00 && op != 0x20;
    ours |= f.cur_ours;
    if (!label.empty()) label += " + ";
    label += opcode_name(op);
    if (op == 0x25 && (b[1] & 0x01)) label += " (status)";
    off += pdu;
    f.next = seg.seq + off;
  }
  out.label = label.empty() ? "data" : label;
  out.ours = ours;
}

// ---- Second pass ---------------------------------------------------------------------------------

struct Collect {
  LadderRequest* r = nullptr;
  uint64_t first = 0, last = 0;  // frames of the command (last: UINT64_MAX while open)
  int64_t after_until = 0;
  std::set<uint64_t> forced;
  std::deque<LadderSeg> before, tail;
  std::vector<LadderSeg> kept;  // head and evidence frames
  uint64_t inside = 0, pending_elided = 0;
  size_t after = 0;
  bool done = false;
  Framer framer[2];
};

class Collector final : public ReaderEvents {
public:
  explicit Collector(std::vector<Collect>& c) : c_(c) {}
  void on_segment(const Segment& seg) override {
    for (Collect& c : c_) {
      if (c.done) continue;
      const ConnectionInfo& k = c.r->conn;
      bool from_i;
      if (seg.src.port == k.initiator.port && seg.dst.port == k.target.port && seg.src == k.initiator &&
          seg.dst == k.target)
        from_i = true;
      else if (seg.src.port == k.target.port && seg.dst.port == k.initiator.port && seg.src == k.target &&
               seg.dst == k.initiator)
        from_i = false;
      else {
        if (seg.frame > c.last && seg.time_ns > c.after_until) c.done = true;
        continue;
      }
      LadderSeg s;
      s.frame = seg.frame;
      s.time_ns = seg.time_ns;
      s.from_initiator = from_i;
      s.seq = seg.seq;
      s.ack = seg.ack;
      s.len = seg.payload_wire_len;
      s.flags = seg.flags;
      s.window = seg.window;
      label_segment(c.framer[from_i ? 0 : 1], seg, from_i, c.r->command.itt, c.r->conn.header_digest,
                    c.r->conn.data_digest, s);
      add(c, std::move(s));
    }
  }
  void on_notice(Notice::Level, uint64_t, std::string) override {}
  // Every diagram complete: the rest of the file is not needed.
  bool finished() const override {
    return std::all_of(c_.begin(), c_.end(), [](const Collect& c) { return c.done; });
  }

private:
  static void add(Collect& c, LadderSeg&& s) {
    if (s.frame < c.first) {
      c.before.push_back(std::move(s));
      if (c.before.size() > kBefore) c.before.pop_front();
      return;
    }
    if (s.frame > c.last) {
      if (c.after < kAfter && s.time_ns <= c.after_until) {
        c.kept.push_back(std::move(s));
        ++c.after;
      }
      if (c.after >= kAfter || s.time_ns > c.after_until) c.done = true;
      return;
    }
    if (c.inside++ < kHead) {
      c.kept.push_back(std::move(s));
      return;
    }
    c.tail.push_back(std::move(s));
    if (c.tail.size() <= kTail) return;
    LadderSeg old = std::move(c.tail.front());
    c.tail.pop_front();
    if (c.forced.count(old.frame)) {
      old.elided_before = c.pending_elided;
      c.pending_elided = 0;
      c.kept.push_back(std::move(old));
    } else {
      ++c.pending_elided;
    }
  }
  std::vector<Collect>& c_;
};

}  // namespace

void collect_ladders(const std::string& path, DecoderChoice decoder, std::vector<LadderRequest*> requests) {
  if (requests.empty()) return;
  std::vector<Collect> c(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    LadderRequest& r = *requests[i];
    Collect& x = c[i];
    x.r = &r;
    x.first = r.command.first_frame;
    x.forced.insert(r.command.first_frame);
    x.forced.insert(r.command.status_frame);
    for (const Finding& f : r.findings) {
      x.forced.insert(f.frame);
      for (const auto& [name, frame] : f.related)
        x.forced.insert(frame);
    }
    // A command without status ends, for the drawing, after its last evidence frame.
    x.last = r.command.status_frame ? r.command.status_frame
                                    : std::max(*x.forced.rbegin(), r.command.first_frame + 2000);
    x.after_until = r.command.status_frame ? r.command.status_ns + kAfterNs : 0;
  }
  // Around each command, a few thousand frames: context segments, PDU framing to sync on, the
  // segments after its status.
  FrameRanges ranges;
  for (const Collect& x : c)
    ranges.emplace_back(x.first > 5000 ? x.first - 5000 : 1,
                        x.last > std::numeric_limits<uint64_t>::max() - 5000 ? x.last : x.last + 5000);
  CaptureReader reader(path, decoder);
  Collector col(c);
  reader.read_frames(col, ranges);
  for (Collect& x : c) {
    std::vector<LadderSeg>& out = x.r->segs;
    out.clear();
    for (auto& s : x.before)
      out.push_back(std::move(s));
    if (!x.tail.empty())
      x.tail.front().elided_before += x.pending_elided;
    else
      x.r->elided_after = x.pending_elided;
    for (auto& s : x.kept)
      out.push_back(std::move(s));
    for (auto& s : x.tail)
      out.push_back(std::move(s));
    std::stable_sort(out.begin(), out.end(),
                     [](const LadderSeg& a, const LadderSeg& b) { return a.frame < b.frame; });
  }
}

// ---- Drawing --------------------------------------------------------------------------------------

namespace {

struct Style {
  const char* color;
  double width;
  const char* dash;  // "" for solid
};

Style style_of(std::string_view role) {
  if (role == "held") return {"#d62728", 3, ""};
  if (role == "release") return {"#1f6fd0", 3, ""};
  if (role == "small") return {"#ef8a17", 2, ""};
  if (role == "retransmission") return {"#9c27b0", 2.5, ""};
  if (role == "original") return {"#9c27b0", 1.5, "5 3"};
  if (role == "command") return {"#222", 1.6, ""};
  if (role == "ack") return {"#888", 1, "4 3"};
  return {"#b8b8b8", 1, ""};  // other
}

const char* kind_label(FindingKind k) { return finding_kind(k).label.data(); }

}  // namespace

std::string render_ladder(const LadderRequest& r, std::string_view pfx, bool standalone) {
  const CommandResult& c = r.command;
  const ConnectionInfo& k = r.conn;
  std::string o;

  // Where the capture point sits, and how long a packet takes from it to either side.
  double rtt_i = k.rtt_initiator_ms, rtt_t = k.rtt_target_ms;
  if (rtt_i < 0 || rtt_t < 0) {
    const double full = k.rtt_ms > 0 ? k.rtt_ms : 0;
    rtt_i = k.vantage == Vantage::initiator ? 0 : k.vantage == Vantage::target ? full : full / 2;
    rtt_t = full - rtt_i;
  }
  const double share = rtt_i + rtt_t > 0 ? std::clamp(rtt_i / (rtt_i + rtt_t), 0.0, 1.0) : 0.5;
  const int64_t di = int64_t(rtt_i * 1e6 / 2), dt = int64_t(rtt_t * 1e6 / 2);  // one-way, ns

  const double W = 860, xi = 290, xt = 650, top = 124;
  const double xc = xi + (xt - xi) * std::clamp(share, 0.03, 0.97);

  // Roles: evidence frames from the findings first, then what the PDUs say.
  std::map<uint64_t, std::string> role;
  auto set_role = [&](uint64_t f, const char* name) {
    if (f) role.emplace(f, name);  // first one wins: findings are listed in order of evidence
  };
  for (const Finding& f : r.findings) {
    auto rel = [&](std::string_view n) -> uint64_t {
      for (const auto& [name, frame] : f.related)
        if (name == n) return frame;
      return 0;
    };
    switch (f.kind) {
      case FindingKind::nagle_hold:
      case FindingKind::cwnd_limited:
      case FindingKind::rwnd_limited:
        set_role(f.frame, "held"), set_role(rel("released_by"), "release"),
            set_role(rel("previous_small"), "small");
        break;
      case FindingKind::delayed_ack:
        set_role(f.frame, "release"), set_role(rel("released"), "held"), set_role(rel("acks"), "small");
        break;
      case FindingKind::retransmission:
        set_role(f.frame, "retransmission"), set_role(rel("original"), "original");
        break;
      default:
        break;
    }
  }
  auto role_of = [&](const LadderSeg& s) -> std::string {
    if (auto it = role.find(s.frame); it != role.end()) return it->second;
    if (s.retransmission) return "retransmission";
    if (s.len == 0) return "ack";
    return s.ours ? "command" : "other";
  };

  // Times: send, capture and arrival of each arrow; origin at the command's first frame.
  struct Arrow {
    const LadderSeg* s;
    int64_t send, cap, arr;
    std::string role;
    int rt = 0;  // round trip completed on arrival
  };
  std::vector<Arrow> arrows;
  for (const LadderSeg& s : r.segs) {
    Arrow a{&s, 0, s.time_ns - c.first_ns, 0, role_of(s)};
    a.send = a.cap - (s.from_initiator ? di : dt);
    a.arr = a.cap + (s.from_initiator ? dt : di);
    arrows.push_back(std::move(a));
  }
  // Round trips: each change of direction along the command's own segments (and the ACK that
  // released a hold) is one crossing; every second crossing completes a round trip.
  {
    int h = 0, last_dir = -1;
    for (Arrow& a : arrows) {
      const LadderSeg& s = *a.s;
      if (s.frame < c.first_frame || (c.status_frame && s.frame > c.status_frame)) continue;
      const bool causal = (s.ours && s.len > 0) || a.role == "held" || a.role == "release";
      if (!causal) continue;
      const int dir = s.from_initiator ? 0 : 1;
      if (dir != last_dir) {
        ++h;
        last_dir = dir;
        if (h % 2 == 0) a.rt = h / 2;
      }
    }
  }

  // Shaded waits: [send - lost, send] on the side that waited.
  struct Shade {
    bool initiator_side;
    int64_t from, to;
    std::string what;
    const char* fill;
    std::string role;
  };
  std::vector<Shade> shades;
  for (const Finding& f : r.findings) {
    const char* what = kind_label(f.kind);
    if (!*what || f.lost_ms <= 0) continue;
    for (const Arrow& a : arrows)
      if (a.s->frame == f.frame) {
        const bool init = f.side == Side::initiator;
        const int64_t end = a.send;
        const char* fill = f.kind == FindingKind::delayed_ack    ? "#ffe08a"
                           : f.kind == FindingKind::target_think ? "#d9ecd0"
                                                                 : "#f9c9c9";
        const std::string shade_role = f.kind == FindingKind::delayed_ack      ? "delayed-ack-wait"
                                       : f.kind == FindingKind::target_think   ? "think"
                                       : f.kind == FindingKind::retransmission ? "loss-wait"
                                                                               : "hold-wait";
        shades.push_back({init, end - int64_t(f.lost_ms * 1e6), end,
                          fmt::format("{} {}", what, ms_text(f.lost_ms)), fill, shade_role});
        break;
      }
  }

  // Vertical scale: proportional to time within the command, with a minimum spacing between
  // captured segments so that bursts stay readable, and long idle stretches outside the command
  // cut short (marked with their length).
  std::vector<int64_t> keys;
  for (const Arrow& a : arrows)
    keys.insert(keys.end(), {a.send, a.cap, a.arr});
  for (const Shade& s : shades)
    keys.insert(keys.end(), {s.from, s.to});
  keys.push_back(0);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const int64_t span = std::max<int64_t>(c.status_ns - c.first_ns + di + dt, 1000);
  const double scale = 440.0 / double(span);  // px per ns
  const int64_t lo_ok = -(di + dt) - span / 20, hi_ok = c.status_ns - c.first_ns + di + dt + span / 20;
  std::vector<double> ys(keys.size());
  struct Break {
    double y0, y1;
    int64_t ns;
  };
  std::vector<Break> breaks;
  {
    double y = top;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i) {
        const int64_t g = keys[i] - keys[i - 1];
        double px = double(g) * scale;
        const bool outside = keys[i] <= lo_ok || keys[i - 1] >= hi_ok;
        if (outside && px > 40) {
          breaks.push_back({y, y + 40, g});
          px = 40;
        }
        y += px;
      }
      ys[i] = y;
    }
  }
  // Captured segments at least 19 px apart (44 where elided ones are marked): the space is added
  // just before the arrow leaves its sender, so that the arrow itself keeps its slope, unless the
  // previous arrow is still under way then.
  {
    auto index = [&](int64_t t) {
      return size_t(std::lower_bound(keys.begin(), keys.end(), t) - keys.begin());
    };
    double last_cap_y = -1e9;
    size_t last_cap_i = 0;
    bool first = true;
    for (const Arrow& a : arrows) {
      const size_t ci = index(a.cap);
      const double need = last_cap_y + (a.s->elided_before ? 44.0 : 19.0) - ys[ci];
      if (!first && need > 0) {
        const size_t from = std::max(index(a.send), last_cap_i + 1);
        for (size_t j = std::min(from, ci); j < ys.size(); ++j)
          ys[j] += need;
        for (Break& b : breaks)
          if (b.y0 >= ys[std::min(from, ci)] - need - 0.01) b.y0 += need, b.y1 += need;
      }
      first = false;
      last_cap_y = ys[ci];
      last_cap_i = std::max(last_cap_i, ci);
    }
  }
  auto Y = [&](int64_t t) {
    auto it = std::lower_bound(keys.begin(), keys.end(), t);
    if (it == keys.end()) return ys.back();
    const size_t i = size_t(it - keys.begin());
    if (*it == t || i == 0) return ys[i];
    const double f = double(t - keys[i - 1]) / double(*it - keys[i - 1]);
    return ys[i - 1] + f * (ys[i] - ys[i - 1]);
  };
  const double bottom = (ys.empty() ? top : ys.back()) + 30;
  const double H = bottom + 84;

  // ---- SVG ----
  fmt::format_to(
      std::back_inserter(o),
      "<svg {}class=\"ladder\" id=\"{}\" data-itt=\"{}\" data-first-frame=\"{}\" data-status-frame=\"{}\" "
      "data-connection=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", pfx, hex32(c.itt), c.first_frame,
      c.status_frame, k.id, num(W), num(H), num(W), num(H));
  o += "<defs>";
  for (const char* rn : {"held", "release", "small", "retransmission", "original", "command", "ack", "other"})
    fmt::format_to(
        std::back_inserter(o),
        "<marker id=\"{}-ah-{}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"9\" "
        "markerHeight=\"9\" markerUnits=\"userSpaceOnUse\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" "
        "fill=\"{}\"/></marker>",
        pfx, rn, style_of(rn).color);
  o += "</defs>\n";
  if (standalone)
    fmt::format_to(std::back_inserter(o), "<rect width=\"{}\" height=\"{}\" fill=\"#fff\"/>\n", num(W),
                   num(H));

  // Title lines.
  std::string what = fmt::format("ITT {}  {}", hex32(c.itt), c.op);
  if (c.lba) what += fmt::format("  LBA {}", *c.lba);
  what += fmt::format("  {}", size_text(c.bytes));
  std::string kinds;
  for (auto f : c.findings)
    kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", finding_name(f));
  std::string line2 = c.completed
                          ? fmt::format("latency {}, {} round trip{} (ideal {}), frames {}-{}",
                                        ms_text(c.latency_ms), c.round_trips, c.round_trips == 1 ? "" : "s",
                                        c.ideal_round_trips, c.first_frame, c.status_frame)
                          : fmt::format("no status seen, from frame {}", c.first_frame);
  if (!kinds.empty()) line2 += "  —  " + kinds;
  fmt::format_to(std::back_inserter(o),
                 "<text x=\"12\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n"
                 "<text x=\"12\" y=\"42\" fill=\"#444\">{}</text>\n",
                 esc(what), esc(line2));

  // Lanes.
  const double lane_top = top - 26;
  fmt::format_to(
      std::back_inserter(o),
      "<text x=\"{0}\" y=\"66\" text-anchor=\"middle\" font-weight=\"bold\">initiator</text>"
      "<text x=\"{0}\" y=\"80\" text-anchor=\"middle\" fill=\"#555\" font-size=\"11\">{1}</text>\n"
      "<text x=\"{2}\" y=\"66\" text-anchor=\"middle\" font-weight=\"bold\">target</text>"
      "<text x=\"{2}\" y=\"80\" text-anchor=\"middle\" fill=\"#555\" font-size=\"11\">{3}</text>\n",
      num(xi), esc(k.initiator.str()), num(xt), esc(k.target.str()));
  fmt::format_to(std::back_inserter(o),
                 "<line x1=\"{0}\" y1=\"{2}\" x2=\"{0}\" y2=\"{3}\" stroke=\"#333\" stroke-width=\"2\"/>"
                 "<line x1=\"{1}\" y1=\"{2}\" x2=\"{1}\" y2=\"{3}\" stroke=\"#333\" stroke-width=\"2\"/>\n",
                 num(xi), num(xt), num(lane_top + 8), num(bottom));
  fmt::format_to(
      std::back_inserter(o),
      "<g id=\"{0}-vantage\" data-role=\"vantage\" data-vantage=\"{1}\">"
      "<line x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" y2=\"{4}\" stroke=\"#2a9d8f\" stroke-width=\"1.5\" "
      "stroke-dasharray=\"6 4\"/>"
      "<text x=\"{7}\" y=\"{5}\" text-anchor=\"{8}\" fill=\"#2a9d8f\" font-size=\"11\">{6}</text></g>\n",
      pfx, vantage_name(k.vantage), num(xc), num(lane_top + 8), num(bottom), num(lane_top + 2),
      esc(fmt::format("capture point ({})", vantage_words(k.vantage))),
      num(share < 0.3   ? xc - 4
          : share > 0.7 ? xc + 4
                        : xc),
      share < 0.3   ? "start"
      : share > 0.7 ? "end"
                    : "middle");

  // Shades.
  for (size_t i = 0; i < shades.size(); ++i) {
    const Shade& s = shades[i];
    const double y0 = Y(s.from), y1 = Y(s.to);
    const double x = s.initiator_side ? xi : xt - 46;
    const double tx = s.initiator_side ? xi - 10 : xt + 10;
    fmt::format_to(
        std::back_inserter(o),
        "<g id=\"{}-w{}\" data-role=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"46\" height=\"{}\" fill=\"{}\" "
        "opacity=\"0.85\"/><text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"#7a5b00\" "
        "font-weight=\"bold\">{}</text></g>\n",
        pfx, i, s.role, num(x), num(y0), num(std::max(1.0, y1 - y0)), s.fill, num(tx), num((y0 + y1) / 2 + 4),
        s.initiator_side ? "end" : "start", esc(s.what));
  }
  // Idle stretches drawn shorter than they were.
  for (const Break& b : breaks) {
    const double ym = (b.y0 + b.y1) / 2;
    fmt::format_to(
        std::back_inserter(o),
        "<g data-role=\"break\"><path d=\"M{0},{2} l8,-5 l8,10 l8,-5 M{1},{2} l-8,-5 l-8,10 l-8,-5\" "
        "stroke=\"#999\" fill=\"none\" transform=\"translate(-12,0)\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"middle\" fill=\"#888\" font-size=\"11\">"
        "… {5} idle, not to scale …</text></g>\n",
        num(xi), num(xt + 24), num(ym), num((xi + xt) / 2), num(ym + 4), ms_text(double(b.ns) / 1e6));
  }

  // Arrows.
  std::string last_label[2];
  for (const Arrow& a : arrows) {
    const LadderSeg& s = *a.s;
    const Style st = style_of(a.role);
    const double xs = s.from_initiator ? xi : xt, xr = s.from_initiator ? xt : xi;
    const double ys0 = Y(a.send), yc = Y(a.cap), yr = Y(a.arr);
    if (s.elided_before)
      fmt::format_to(std::back_inserter(o),
                     "<text x=\"12\" y=\"{}\" fill=\"#888\" font-style=\"italic\" font-size=\"11\" "
                     "data-role=\"elided\">… {} segments not drawn</text>\n",
                     num(yc - 20), count_text(s.elided_before));
    const double tm = double(a.cap) / 1e6;
    std::string tip = fmt::format("frame {}, {}{:.3f} ms, {} → {}, seq {} ack {} len {} win {}{}", s.frame,
                                  tm >= 0 ? "+" : "", tm, s.from_initiator ? "initiator" : "target",
                                  s.from_initiator ? "target" : "initiator", s.seq, s.ack, s.len, s.window,
                                  s.label.empty() ? "" : ", " + s.label);
    fmt::format_to(
        std::back_inserter(o),
        "<g id=\"{}-f{}\" class=\"seg\" data-frame=\"{}\" data-role=\"{}\" data-time-ms=\"{:.3f}\">"
        "<title>{}</title>",
        pfx, s.frame, s.frame, a.role, tm, esc(tip));
    fmt::format_to(std::back_inserter(o),
                   "<polyline points=\"{},{} {},{} {},{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} "
                   "marker-end=\"url(#{}-ah-{})\"/>",
                   num(xs), num(ys0), num(xc), num(yc), num(xr - (s.from_initiator ? 1 : -1)), num(yr),
                   st.color, num(st.width), *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "",
                   pfx, a.role);
    fmt::format_to(std::back_inserter(o), "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"#2a9d8f\"/>", num(xc),
                   num(yc));
    // Label near the middle of the ladder, on the arrow.
    // Label where arrows are furthest apart: near the capture point, towards the receiver for
    // initiator arrows, towards the sender for target ones (so crossing arrows do not share it).
    const double xm = std::clamp(xc + (s.from_initiator ? 90.0 : -90.0), xi + 60, xt - 60);
    const double ym = xm < xc ? (s.from_initiator ? ys0 + (yc - ys0) * (xm - xs) / std::max(1.0, xc - xs)
                                                  : yr + (yc - yr) * (xm - xr) / std::max(1.0, xc - xr))
                              : (s.from_initiator ? yc + (yr - yc) * (xm - xc) / std::max(1.0, xr - xc)
                                                  : yc + (ys0 - yc) * (xm - xc) / std::max(1.0, xs - xc));
    // Text on the arrow: PDUs by name; a run of continuation segments or of pure ACKs is named once.
    const bool strong = a.role == "held" || a.role == "release";
    const bool cont = s.label == "data" || s.label == "ACK";
    const int dir = s.from_initiator ? 0 : 1;
    std::string text;
    if (strong || !cont || last_label[dir] != s.label) {
      text = s.label == "data" ? std::string("…") : s.label;
      if (s.len) text += fmt::format("  {} B", s.len);
    }
    last_label[dir] = s.label;
    if (!text.empty())
      fmt::format_to(std::back_inserter(o),
                     "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{}\"{} "
                     "stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
                     num(xm), num(ym - 4), a.role == "other" ? "#999" : st.color,
                     strong ? " font-weight=\"bold\"" : "", esc(text));
    // Frame and capture time at the left.
    fmt::format_to(
        std::back_inserter(o),
        "<text x=\"12\" y=\"{0}\" fill=\"#555\" font-size=\"11\">#{1}</text>"
        "<text x=\"130\" y=\"{0}\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">{2}{3:.3f} ms</text>",
        num(yc + 4), s.frame, tm >= 0 ? "+" : "", tm);
    if (strong) {
      const char* tag = a.role == "held" ? "held segment" : "releasing ACK";
      fmt::format_to(std::back_inserter(o),
                     "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"{}\" font-weight=\"bold\" "
                     "font-size=\"11\">{}</text>",
                     num(s.from_initiator ? xi - 30 : xt + 30), num(ys0 + 4),
                     s.from_initiator ? "end" : "start", st.color, tag);
    }
    if (a.rt)
      fmt::format_to(std::back_inserter(o),
                     "<g data-role=\"round-trip\" data-rt=\"{0}\"><circle cx=\"{1}\" cy=\"{2}\" r=\"9\" "
                     "fill=\"#264653\"/>"
                     "<text x=\"{1}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#fff\" font-size=\"11\" "
                     "font-weight=\"bold\">{0}</text></g>",
                     a.rt, num(xr + (s.from_initiator ? 16 : -16)), num(yr), num(yr + 4));
    o += "</g>\n";
  }
  if (r.elided_after)
    fmt::format_to(
        std::back_inserter(o),
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\" font-style=\"italic\">… {} more "
        "segments not drawn …</text>\n",
        num((xi + xt) / 2), num(bottom - 8), count_text(r.elided_after));

  // Legend.
  const double ly = bottom + 28;
  struct Item {
    const char* color;
    const char* text;
    bool box;
  };
  const Item items[] = {{"#222", "this command", false},       {"#d62728", "held segment", false},
                        {"#1f6fd0", "releasing ACK", false},   {"#ef8a17", "earlier small segment", false},
                        {"#888", "pure ACK", false},           {"#b8b8b8", "others", false},
                        {"#ffe08a", "delayed-ACK wait", true}, {"#f9c9c9", "hold", true}};
  double lx = 12;
  for (const Item& it : items) {
    if (it.box)
      fmt::format_to(std::back_inserter(o),
                     "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"{}\"/>", num(lx), num(ly - 9),
                     it.color);
    else
      fmt::format_to(std::back_inserter(o),
                     "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>",
                     num(lx), num(ly - 4), num(lx + 18), num(ly - 4), it.color);
    fmt::format_to(std::back_inserter(o), "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", num(lx + 23),
                   num(ly), it.text);
    lx += 32 + 5.8 * double(std::strlen(it.text));
  }
  fmt::format_to(
      std::back_inserter(o),
      "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Left: frame, and when the capture "
      "point saw it (dot), from the command's first frame. Numbered circles: round trips completed.</text>"
      "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Arrows leave and reach each side half "
      "a measured round trip from the capture point: RTT {}, capture point ↔ initiator {}, ↔ target "
      "{}.</text>\n",
      num(ly + 20), num(ly + 36), ms_text(k.rtt_ms), ms_text(rtt_i), ms_text(rtt_t));
  o += "</svg>\n";
  return o;
}

// ---- `iscsi-doctor ladder` ------------------------------------------------------------------------

namespace {

// First pass for one command: the command with the ITT (the first one, or the one at --frame) and
// its findings.
class FindOne final : public Sink {
public:
  FindOne(uint32_t itt, uint64_t frame) : itt_(itt), frame_(frame) {}
  void on_command(const CommandResult& c) override {
    if (c.itt != itt_) return;
    if (frame_ && !(c.first_frame == frame_ || (c.first_frame <= frame_ && frame_ <= c.status_frame))) return;
    if (found_ && best_.first_frame <= c.first_frame) return;
    best_ = c;
    found_ = true;
  }
  void on_finding(const Finding& f) override {
    if (f.itt && *f.itt == itt_ && findings_.size() < 100000) findings_.push_back(f);
  }
  bool found() const { return found_; }
  const CommandResult& command() const { return best_; }
  std::vector<Finding> findings_of(const CommandResult& c) const {
    std::vector<Finding> out;
    for (const Finding& f : findings_)
      if (f.connection == c.connection && f.command_first_frame == c.first_frame) out.push_back(f);
    return out;
  }

private:
  uint32_t itt_;
  uint64_t frame_;
  bool found_ = false;
  CommandResult best_;
  std::vector<Finding> findings_;
};

class Feed final : public ReaderEvents {
public:
  explicit Feed(Analyzer& a) : a_(a) {}
  void on_segment(const Segment& s) override { a_.feed(s); }
  void on_notice(Notice::Level level, uint64_t frame, std::string message) override {
    if (level == Notice::Level::error) errors.push_back(fmt::format("frame {}: {}", frame, message));
  }
  std::vector<std::string> errors;

private:
  Analyzer& a_;
};

}  // namespace

int ladder_main(int argc, char** argv) {
  CLI::App app{"iscsi-doctor ladder: one command's packet exchange as an SVG ladder diagram",
               "iscsi-doctor ladder"};
  std::string capture, itt_text, output, decoder = "fast";
  uint64_t frame = 0;
  std::vector<uint16_t> ports;
  bool no_detect = false, quiet = false;
  Options engine;
  app.add_option("CAPTURE", capture, "pcap or pcapng file, gzip-compressed or not")->required();
  app.add_option("--itt", itt_text,
                 "the command's Initiator Task Tag (0x-prefixed hex, as the reports print it)")
      ->required();
  app.add_option(
      "--frame", frame,
      "when the ITT repeats: the command whose frames span N (default: the first command with the ITT)");
  app.add_option("-o,--output", output, "write the SVG to FILE instead of standard output");
  app.add_option("--port", ports, "iSCSI target port (repeatable or comma-separated; default 3260)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(CLI::Range(1, 65535));
  app.add_flag("--no-detect-ports", no_detect, "only follow the --port ports");
  app.add_option("--delayed-ack-ms", engine.delayed_ack_min_ms,
                 "an ACK later than this beyond the RTT counts as delayed")
      ->check(CLI::PositiveNumber);
  app.add_option("--decoder", decoder, "packet decoder: fast (default) or libtins")
      ->check(CLI::IsMember({"fast", "libtins"}));
  app.add_flag("-q,--quiet", quiet, "no notices on standard error");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUnusable;
  }
  uint32_t itt = 0;
  {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(itt_text.c_str(), &end, 0);
    if (itt_text.empty() || *end || errno || v > 0xffffffffull) {
      std::fprintf(stderr, "iscsi-doctor ladder: --itt: not a 32-bit number: '%s'\n", itt_text.c_str());
      return kExitUnusable;
    }
    itt = uint32_t(v);
  }
  if (!ports.empty()) engine.ports = ports;
  engine.detect_ports = !no_detect;
  const DecoderChoice dec = decoder == "libtins" ? DecoderChoice::libtins : DecoderChoice::fast;

  LadderRequest req;
  try {
    FindOne sink(itt, frame);
    Analyzer analyzer(engine, sink);
    CaptureReader reader(capture, dec);
    Feed feed(analyzer);
    reader.read_all(feed);
    analyzer.finish();
    if (!quiet)
      for (const auto& e : feed.errors)
        std::fprintf(stderr, "iscsi-doctor ladder: %s: %s\n", capture.c_str(), e.c_str());
    if (!sink.found()) {
      std::fprintf(stderr, "iscsi-doctor ladder: %s: no command with ITT 0x%08x%s\n", capture.c_str(), itt,
                   frame ? fmt::format(" at frame {}", frame).c_str() : "");
      return kExitUnusable;
    }
    req.command = sink.command();
    req.findings = sink.findings_of(req.command);
    for (const ConnectionInfo& ci : analyzer.connections())
      if (ci.id == req.command.connection) req.conn = ci;
    collect_ladders(capture, dec, {&req});
  } catch (const CaptureError& e) {
    std::fprintf(stderr, "iscsi-doctor ladder: error: %s\n", e.what());
    return kExitUnusable;
  }
  std::string doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  doc += render_ladder(req, fmt::format("ladder-{:08x}", itt), true);
  FILE* out = output.empty() ? stdout : std::fopen(output.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "iscsi-doctor ladder: %s: cannot write: %s\n", output.c_str(), std::strerror(errno));
    return kExitUnusable;
  }
  std::fwrite(doc.data(), 1, doc.size(), out);
  const bool bad = std::fflush(out) != 0 || std::ferror(out);
  if (out != stdout) std::fclose(out);
  if (bad) {
    std::fprintf(stderr, "iscsi-doctor ladder: write error\n");
    return kExitUnusable;
  }
  return kExitClean;
}

}  // namespace iscsi_doctor::cli
