// SPDX-License-Identifier: GPL-2.0-or-later
// Drawing a ladder (render_ladder, ladder.hpp), step by step: where the capture point sits, each
// segment as an arrow with its role, the shaded waits, a vertical time axis that keeps bursts
// readable and cuts idle stretches short; then the SVG: head and title, lanes, shades, breaks,
// arrows, legend.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "formatting.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "ladder.hpp"
#include "svg.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;
using svg::num;

// Geometry (px): the initiator's and the target's lines, and where the first arrow may start.
constexpr double kWidth = 860, kInitiatorX = 290, kTargetX = 650, kTop = 124;

template <typename... Args>
void put(std::string& o, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(o), f, std::forward<Args>(args)...);
}

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

// ---- Facts: capture point, roles, arrows, round trips, waits -------------------------------------

// Where the capture point sits, and how long a packet takes from it to either side.
struct CapturePoint {
  double rtt_i = 0, rtt_t = 0;  // ms, capture point <-> that side and back (split from the RTT if unmeasured)
  double share = 0.5;           // of the way from the initiator to the target
  int64_t to_initiator_ns = 0, to_target_ns = 0;  // one way
  double x = 0;
};

CapturePoint place_capture_point(const ConnectionInfo& k) {
  CapturePoint p;
  p.rtt_i = k.rtt_initiator_ms, p.rtt_t = k.rtt_target_ms;
  if (p.rtt_i < 0 || p.rtt_t < 0) {
    const double full = k.rtt_ms > 0 ? k.rtt_ms : 0;
    p.rtt_i = k.vantage == Vantage::initiator ? 0 : k.vantage == Vantage::target ? full : full / 2;
    p.rtt_t = full - p.rtt_i;
  }
  p.share = p.rtt_i + p.rtt_t > 0 ? std::clamp(p.rtt_i / (p.rtt_i + p.rtt_t), 0.0, 1.0) : 0.5;
  p.to_initiator_ns = int64_t(p.rtt_i * 1e6 / 2), p.to_target_ns = int64_t(p.rtt_t * 1e6 / 2);
  p.x = kInitiatorX + (kTargetX - kInitiatorX) * std::clamp(p.share, 0.03, 0.97);
  return p;
}

// The roles the findings give their evidence frames; the first finding to name a frame wins
// (findings are listed in order of evidence).
std::map<uint64_t, std::string> evidence_roles(const std::vector<Finding>& findings) {
  std::map<uint64_t, std::string> role;
  auto set_role = [&](uint64_t f, const char* name) {
    if (f) role.emplace(f, name);
  };
  for (const Finding& f : findings) {
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
  return role;
}

// One segment as drawn: when it left its sender, passed the capture point and reached its
// receiver (ns from the command's first frame).
struct Arrow {
  const LadderSeg* s;
  int64_t send, cap, arr;
  std::string role;
  int rt = 0;  // round trip completed on arrival
};

std::vector<Arrow> make_arrows(const LadderRequest& r, const CapturePoint& cp) {
  const std::map<uint64_t, std::string> roles = evidence_roles(r.findings);
  auto role_of = [&](const LadderSeg& s) -> std::string {
    if (auto it = roles.find(s.frame); it != roles.end()) return it->second;
    if (s.retransmission) return "retransmission";
    if (s.len == 0) return "ack";
    return s.ours ? "command" : "other";
  };
  std::vector<Arrow> arrows;
  for (const LadderSeg& s : r.segs) {
    Arrow a{&s, 0, s.time_ns - r.command.first_ns, 0, role_of(s)};
    a.send = a.cap - (s.from_initiator ? cp.to_initiator_ns : cp.to_target_ns);
    a.arr = a.cap + (s.from_initiator ? cp.to_target_ns : cp.to_initiator_ns);
    arrows.push_back(std::move(a));
  }
  return arrows;
}

// Round trips as the engine counted them (docs/rules.md "Round trips"): a marker where the
// command's half trips complete another round trip (every second crossing). Should the drawn
// events end short of the round trips the command is reported with, its status says them.
void number_round_trips(std::vector<Arrow>& arrows, const CommandResult& c) {
  int shown = 0;
  Arrow* status = nullptr;
  for (Arrow& a : arrows) {
    const LadderSeg& s = *a.s;
    if (c.status_frame && s.frame == c.status_frame) status = &a;
    if (s.half_trips < 0 || s.half_trips / 2 <= shown) continue;
    a.rt = shown = s.half_trips / 2;
  }
  if (status && shown < c.round_trips) status->rt = c.round_trips;
}

// A shaded wait: [send - lost, send] of the evidence frame, on the side that waited.
struct Shade {
  bool initiator_side;
  int64_t from, to;
  std::string what;
  const char* fill;
  std::string role;
};

std::vector<Shade> make_shades(const std::vector<Finding>& findings, const std::vector<Arrow>& arrows) {
  std::vector<Shade> shades;
  for (const Finding& f : findings) {
    const char* what = finding_kind(f.kind).label.data();
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
  return shades;
}

// ---- Vertical layout ---------------------------------------------------------------------------

// An idle stretch drawn shorter than it was.
struct Break {
  double y0, y1;
  int64_t ns;
};

// Time to y: proportional within the command, with a minimum spacing between captured segments
// so that bursts stay readable, and long idle stretches outside the command cut short.
class TimeAxis {
public:
  TimeAxis(const std::vector<Arrow>& arrows, const std::vector<Shade>& shades, const CommandResult& c,
           const CapturePoint& cp) {
    for (const Arrow& a : arrows)
      keys_.insert(keys_.end(), {a.send, a.cap, a.arr});
    for (const Shade& s : shades)
      keys_.insert(keys_.end(), {s.from, s.to});
    keys_.push_back(0);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    scale(c, cp.to_initiator_ns + cp.to_target_ns);
    space_out(arrows);
  }

  double y(int64_t t) const {
    auto it = std::lower_bound(keys_.begin(), keys_.end(), t);
    if (it == keys_.end()) return ys_.back();
    const size_t i = size_t(it - keys_.begin());
    if (*it == t || i == 0) return ys_[i];
    const double f = double(t - keys_[i - 1]) / double(*it - keys_[i - 1]);
    return ys_[i - 1] + f * (ys_[i] - ys_[i - 1]);
  }
  double last_y() const { return ys_.empty() ? kTop : ys_.back(); }
  const std::vector<Break>& breaks() const { return breaks_; }

private:
  // 440 px for the command and a round trip; gaps of more than 40 px outside it become breaks.
  void scale(const CommandResult& c, int64_t round_trip_ns) {
    const int64_t span = std::max<int64_t>(c.status_ns - c.first_ns + round_trip_ns, 1000);
    const double px_per_ns = 440.0 / double(span);
    const int64_t lo_ok = -round_trip_ns - span / 20,
                  hi_ok = c.status_ns - c.first_ns + round_trip_ns + span / 20;
    ys_.resize(keys_.size());
    double y = kTop;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (i) {
        const int64_t g = keys_[i] - keys_[i - 1];
        double px = double(g) * px_per_ns;
        const bool outside = keys_[i] <= lo_ok || keys_[i - 1] >= hi_ok;
        if (outside && px > 40) {
          breaks_.push_back({y, y + 40, g});
          px = 40;
        }
        y += px;
      }
      ys_[i] = y;
    }
  }

  // Captured segments at least 19 px apart (44 where elided ones are marked): the space is added
  // just before the arrow leaves its sender, so that the arrow itself keeps its slope, unless the
  // previous arrow is still under way then.
  void space_out(const std::vector<Arrow>& arrows) {
    auto index = [&](int64_t t) {
      return size_t(std::lower_bound(keys_.begin(), keys_.end(), t) - keys_.begin());
    };
    double last_cap_y = -1e9;
    size_t last_cap_i = 0;
    bool first = true;
    for (const Arrow& a : arrows) {
      const size_t ci = index(a.cap);
      const double need = last_cap_y + (a.s->elided_before ? 44.0 : 19.0) - ys_[ci];
      if (!first && need > 0) {
        const size_t from = std::max(index(a.send), last_cap_i + 1);
        for (size_t j = std::min(from, ci); j < ys_.size(); ++j)
          ys_[j] += need;
        for (Break& b : breaks_)
          if (b.y0 >= ys_[std::min(from, ci)] - need - 0.01) b.y0 += need, b.y1 += need;
      }
      first = false;
      last_cap_y = ys_[ci];
      last_cap_i = std::max(last_cap_i, ci);
    }
  }

  std::vector<int64_t> keys_;  // every time drawn, sorted, unique
  std::vector<double> ys_;     // their y
  std::vector<Break> breaks_;
};

// ---- SVG -------------------------------------------------------------------------------------------

void draw_head(std::string& o, const LadderRequest& r, std::string_view pfx, bool standalone, double height) {
  const CommandResult& c = r.command;
  put(o,
      "<svg {}class=\"ladder\" id=\"{}\" data-itt=\"{}\" data-first-frame=\"{}\" data-status-frame=\"{}\" "
      "data-connection=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", pfx, hex32(c.itt), c.first_frame,
      c.status_frame, r.conn.id, num(kWidth), num(height), num(kWidth), num(height));
  o += "<defs>";
  for (const char* rn : {"held", "release", "small", "retransmission", "original", "command", "ack", "other"})
    put(o,
        "<marker id=\"{}-ah-{}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"9\" "
        "markerHeight=\"9\" markerUnits=\"userSpaceOnUse\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" "
        "fill=\"{}\"/></marker>",
        pfx, rn, style_of(rn).color);
  o += "</defs>\n";
  if (standalone) put(o, "<rect width=\"{}\" height=\"{}\" fill=\"#fff\"/>\n", num(kWidth), num(height));
}

void draw_title(std::string& o, const CommandResult& c) {
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
  put(o,
      "<text x=\"12\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"12\" y=\"42\" fill=\"#444\">{}</text>\n",
      esc(what), esc(line2));
}

// The two sides' lines with their addresses, and the capture point dashed between them.
void draw_lanes(std::string& o, std::string_view pfx, const ConnectionInfo& k, const CapturePoint& cp,
                double bottom) {
  const double xi = kInitiatorX, xt = kTargetX, lane_top = kTop - 26;
  put(o,
      "<text x=\"{0}\" y=\"66\" text-anchor=\"middle\" font-weight=\"bold\">initiator</text>"
      "<text x=\"{0}\" y=\"80\" text-anchor=\"middle\" fill=\"#555\" font-size=\"11\">{1}</text>\n"
      "<text x=\"{2}\" y=\"66\" text-anchor=\"middle\" font-weight=\"bold\">target</text>"
      "<text x=\"{2}\" y=\"80\" text-anchor=\"middle\" fill=\"#555\" font-size=\"11\">{3}</text>\n",
      num(xi), esc(k.initiator.str()), num(xt), esc(k.target.str()));
  put(o,
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{0}\" y2=\"{3}\" stroke=\"#333\" stroke-width=\"2\"/>"
      "<line x1=\"{1}\" y1=\"{2}\" x2=\"{1}\" y2=\"{3}\" stroke=\"#333\" stroke-width=\"2\"/>\n",
      num(xi), num(xt), num(lane_top + 8), num(bottom));
  const double share = cp.share, xc = cp.x;
  put(o,
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
}

void draw_shades(std::string& o, std::string_view pfx, const std::vector<Shade>& shades,
                 const TimeAxis& axis) {
  for (size_t i = 0; i < shades.size(); ++i) {
    const Shade& s = shades[i];
    const double y0 = axis.y(s.from), y1 = axis.y(s.to);
    const double x = s.initiator_side ? kInitiatorX : kTargetX - 46;
    const double tx = s.initiator_side ? kInitiatorX - 10 : kTargetX + 10;
    put(o,
        "<g id=\"{}-w{}\" data-role=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"46\" height=\"{}\" fill=\"{}\" "
        "opacity=\"0.85\"/><text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"#7a5b00\" "
        "font-weight=\"bold\">{}</text></g>\n",
        pfx, i, s.role, num(x), num(y0), num(std::max(1.0, y1 - y0)), s.fill, num(tx), num((y0 + y1) / 2 + 4),
        s.initiator_side ? "end" : "start", esc(s.what));
  }
}

void draw_breaks(std::string& o, const TimeAxis& axis) {
  const double xi = kInitiatorX, xt = kTargetX;
  for (const Break& b : axis.breaks()) {
    const double ym = (b.y0 + b.y1) / 2;
    put(o,
        "<g data-role=\"break\"><path d=\"M{0},{2} l8,-5 l8,10 l8,-5 M{1},{2} l-8,-5 l-8,10 l-8,-5\" "
        "stroke=\"#999\" fill=\"none\" transform=\"translate(-12,0)\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"middle\" fill=\"#888\" font-size=\"11\">"
        "… {5} idle, not to scale …</text></g>\n",
        num(xi), num(xt + 24), num(ym), num((xi + xt) / 2), num(ym + 4), ms_text(double(b.ns) / 1e6));
  }
}

// Each arrow as a <g class="seg"> (data-frame, data-role), with its label, its frame and time at
// the left, and the round trip it completes. A run of continuation segments or of pure ACKs is
// named once per direction (last_label).
void draw_arrow(std::string& o, std::string_view pfx, const Arrow& a, const TimeAxis& axis,
                const CapturePoint& cp, std::string (&last_label)[2]) {
  const double xi = kInitiatorX, xt = kTargetX, xc = cp.x;
  const LadderSeg& s = *a.s;
  const Style st = style_of(a.role);
  const double xs = s.from_initiator ? xi : xt, xr = s.from_initiator ? xt : xi;
  const double ys0 = axis.y(a.send), yc = axis.y(a.cap), yr = axis.y(a.arr);
  if (s.elided_before)
    put(o,
        "<text x=\"12\" y=\"{}\" fill=\"#888\" font-style=\"italic\" font-size=\"11\" "
        "data-role=\"elided\">… {} segments not drawn</text>\n",
        num(yc - 20), count_text(s.elided_before));
  const double tm = double(a.cap) / 1e6;
  std::string tip = fmt::format("frame {}, {}{:.3f} ms, {} → {}, seq {} ack {} len {} win {}{}", s.frame,
                                tm >= 0 ? "+" : "", tm, s.from_initiator ? "initiator" : "target",
                                s.from_initiator ? "target" : "initiator", s.seq, s.ack, s.len, s.window,
                                s.label.empty() ? "" : ", " + s.label);
  put(o,
      "<g id=\"{}-f{}\" class=\"seg\" data-frame=\"{}\" data-role=\"{}\" data-time-ms=\"{:.3f}\">"
      "<title>{}</title>",
      pfx, s.frame, s.frame, a.role, tm, esc(tip));
  put(o,
      "<polyline points=\"{},{} {},{} {},{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} "
      "marker-end=\"url(#{}-ah-{})\"/>",
      num(xs), num(ys0), num(xc), num(yc), num(xr - (s.from_initiator ? 1 : -1)), num(yr), st.color,
      num(st.width), *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "", pfx, a.role);
  put(o, "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"#2a9d8f\"/>", num(xc), num(yc));
  // Label where arrows are furthest apart: near the capture point, towards the receiver for
  // initiator arrows, towards the sender for target ones (so crossing arrows do not share it).
  const double xm = std::clamp(xc + (s.from_initiator ? 90.0 : -90.0), xi + 60, xt - 60);
  const double ym = xm < xc ? (s.from_initiator ? ys0 + (yc - ys0) * (xm - xs) / std::max(1.0, xc - xs)
                                                : yr + (yc - yr) * (xm - xr) / std::max(1.0, xc - xr))
                            : (s.from_initiator ? yc + (yr - yc) * (xm - xc) / std::max(1.0, xr - xc)
                                                : yc + (ys0 - yc) * (xm - xc) / std::max(1.0, xs - xc));
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
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{}\"{} "
        "stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
        num(xm), num(ym - 4), a.role == "other" ? "#999" : st.color, strong ? " font-weight=\"bold\"" : "",
        esc(text));
  // Frame and capture time at the left.
  put(o,
      "<text x=\"12\" y=\"{0}\" fill=\"#555\" font-size=\"11\">#{1}</text>"
      "<text x=\"130\" y=\"{0}\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">{2}{3:.3f} ms</text>",
      num(yc + 4), s.frame, tm >= 0 ? "+" : "", tm);
  if (strong) {
    const char* tag = a.role == "held" ? "held segment" : "releasing ACK";
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"{}\" font-weight=\"bold\" "
        "font-size=\"11\">{}</text>",
        num(s.from_initiator ? xi - 30 : xt + 30), num(ys0 + 4), s.from_initiator ? "end" : "start", st.color,
        tag);
  }
  if (a.rt)
    put(o,
        "<g data-role=\"round-trip\" data-rt=\"{0}\"><circle cx=\"{1}\" cy=\"{2}\" r=\"9\" "
        "fill=\"#264653\"/>"
        "<text x=\"{1}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#fff\" font-size=\"11\" "
        "font-weight=\"bold\">{0}</text></g>",
        a.rt, num(xr + (s.from_initiator ? 16 : -16)), num(yr), num(yr + 4));
  o += "</g>\n";
}

void draw_legend(std::string& o, double bottom, const ConnectionInfo& k, const CapturePoint& cp) {
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
      put(o, "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"{}\"/>", num(lx), num(ly - 9),
          it.color);
    else
      put(o, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>", num(lx),
          num(ly - 4), num(lx + 18), num(ly - 4), it.color);
    put(o, "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", num(lx + 23), num(ly), it.text);
    lx += 32 + 5.8 * double(std::strlen(it.text));
  }
  put(o,
      "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Left: frame, and when the capture "
      "point saw it (dot), from the command's first frame. Numbered circles: round trips completed.</text>"
      "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Arrows leave and reach each side half "
      "a measured round trip from the capture point: RTT {}, capture point ↔ initiator {}, ↔ target "
      "{}.</text>\n",
      num(ly + 20), num(ly + 36), ms_text(k.rtt_ms), ms_text(cp.rtt_i), ms_text(cp.rtt_t));
}

}  // namespace

std::string render_ladder(const LadderRequest& r, std::string_view pfx, bool standalone) {
  const CapturePoint cp = place_capture_point(r.conn);
  std::vector<Arrow> arrows = make_arrows(r, cp);
  number_round_trips(arrows, r.command);
  const std::vector<Shade> shades = make_shades(r.findings, arrows);
  const TimeAxis axis(arrows, shades, r.command, cp);
  const double bottom = axis.last_y() + 30;

  std::string o;
  draw_head(o, r, pfx, standalone, bottom + 84);
  draw_title(o, r.command);
  draw_lanes(o, pfx, r.conn, cp, bottom);
  draw_shades(o, pfx, shades, axis);
  draw_breaks(o, axis);
  std::string last_label[2];
  for (const Arrow& a : arrows)
    draw_arrow(o, pfx, a, axis, cp, last_label);
  if (r.elided_after)
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\" font-style=\"italic\">… {} more "
        "segments not drawn …</text>\n",
        num((kInitiatorX + kTargetX) / 2), num(bottom - 8), count_text(r.elided_after));
  draw_legend(o, bottom, r.conn, cp);
  o += "</svg>\n";
  return o;
}

}  // namespace iscsi_doctor::cli
