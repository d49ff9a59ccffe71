// SPDX-License-Identifier: GPL-2.0-or-later
// Drawing a ladder (render_ladder, ladder.hpp), step by step: where the capture point sits, each
// segment as an arrow with its role, the shaded waits, a vertical time axis that keeps bursts
// readable and cuts idle stretches short; then the SVG: head and title, lanes, shades, breaks,
// arrows, legend.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "reports/formatting.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "commands/ladder.hpp"
#include "drawing/svg.hpp"
#include "drawing/ladder_axis.hpp"
#include "drawing/ladder_facts.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;
using svg::num;
using namespace ladder;

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
// ---- Labels: no two texts overlap ----------------------------------------------------------------

struct Box {
  double x0, y0, x1, y1;
};

enum class Anchor { start, middle, end };

// A text's extent, estimated on the wide side (sans-serif averages ~0.55 em a character).
Box text_box(double x, double y, Anchor a, double fs, bool bold, std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xc0) != 0x80;
  const double w = double(n) * fs * (bold ? 0.68 : 0.62) + 2;
  const double x0 = a == Anchor::start ? x : a == Anchor::middle ? x - w / 2 : x - w;
  return {x0 - 1, y - fs * 0.95, x0 + w + 1, y + fs * 0.3};
}

// The texts placed so far; each new one takes the first candidate position where it overlaps none.
class Labels {
public:
  void take(const Box& b) { boxes_.push_back(b); }
  bool free(const Box& b) const {
    for (const Box& o : boxes_)
      if (b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1) return false;
    return true;
  }
  std::optional<std::pair<double, double>> fit(const std::vector<std::pair<double, double>>& at, Anchor a,
                                               double fs, bool bold, std::string_view s) {
    for (const auto& [x, y] : at) {
      const Box b = text_box(x, y, a, fs, bold, s);
      if (free(b)) {
        take(b);
        return std::pair{x, y};
      }
    }
    return std::nullopt;
  }

private:
  std::vector<Box> boxes_;
};

// (x, y), then y shifted by ±step, ±2 step, ... up to ±range.
std::vector<std::pair<double, double>> around(double x, double y, double step, double range) {
  std::vector<std::pair<double, double>> v{{x, y}};
  for (double d = step; d <= range; d += step)
    v.insert(v.end(), {{x, y - d}, {x, y + d}});
  return v;
}

// A placed text (drawn only when `at` is set).
struct Placed {
  std::string text;
  std::optional<std::pair<double, double>> at;
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

// Where every text of the body goes: the frame column first (fixed rows), then round-trip
// numbers, the held/releasing tags, the waits, the strong arrows' labels, breaks and elisions,
// then the other arrows' labels; a text that finds no free place is left out (its arrow's tooltip
// keeps it).
struct Layout {
  double time_x = 130;             // end of the time column
  std::vector<double> rt_x;        // per arrow: its round-trip number's centre
  std::vector<Placed> label, tag;  // per arrow
  std::vector<Placed> elided;      // per arrow
  std::vector<Placed> shade;       // per shade
  std::vector<Placed> brk;         // per break
};

Layout place_labels(const std::vector<Arrow>& arrows, const std::vector<Shade>& shades, const TimeAxis& axis,
                    const CapturePoint& cp, const LadderRequest& r, double bottom) {
  const double xi = kInitiatorX, xt = kTargetX, xc = cp.x;
  Layout L;
  Labels used;
  // The head: title, sides, capture point.
  used.take({0, 0, kWidth, kTop - 12});
  // The frame column: "#frame" then the time, right-aligned after the widest frame number.
  double wf = 0, wt = 0;
  auto time_of = [](const Arrow& a) {
    const double tm = double(a.cap) / 1e6;
    return fmt::format("{}{:.3f} ms", tm >= 0 ? "+" : "", tm);
  };
  for (const Arrow& a : arrows) {
    const Box bf = text_box(0, 0, Anchor::start, 11, false, fmt::format("#{}", a.s->frame));
    const Box bt = text_box(0, 0, Anchor::start, 11, false, time_of(a));
    wf = std::max(wf, bf.x1 - bf.x0), wt = std::max(wt, bt.x1 - bt.x0);
  }
  L.time_x = std::max(130.0, 12 + wf + 8 + wt);
  for (const Arrow& a : arrows) {
    const double yc = axis.y(a.cap);
    used.take(text_box(12, yc + 4, Anchor::start, 11, false, fmt::format("#{}", a.s->frame)));
    used.take(text_box(L.time_x, yc + 4, Anchor::end, 11, false, time_of(a)));
  }
  // Round-trip numbers: circles beside the receiver, further out when one is already there.
  L.rt_x.resize(arrows.size());
  for (size_t i = 0; i < arrows.size(); ++i)
    if (arrows[i].rt) {
      const bool fi = arrows[i].s->from_initiator;
      const double y = axis.y(arrows[i].arr);
      for (double d = 16; d < 120; d += 20) {
        const double x = fi ? xt + d : xi - d;
        L.rt_x[i] = x;
        if (used.free({x - 10, y - 10, x + 10, y + 10})) break;
      }
      used.take({L.rt_x[i] - 10, y - 10, L.rt_x[i] + 10, y + 10});
    }
  L.label.resize(arrows.size()), L.tag.resize(arrows.size()), L.elided.resize(arrows.size());
  L.shade.resize(shades.size()), L.brk.resize(axis.breaks().size());
  for (size_t i = 0; i < arrows.size(); ++i) {
    const Arrow& a = arrows[i];
    if (a.role != "held" && a.role != "release") continue;
    const bool fi = a.s->from_initiator;
    L.tag[i].text = a.role == "held" ? "held segment" : "releasing ACK";
    L.tag[i].at = used.fit(around(fi ? xi - 30 : xt + 30, axis.y(a.send) + 4, 7, 42),
                           fi ? Anchor::end : Anchor::start, 11, true, L.tag[i].text);
  }
  for (size_t i = 0; i < shades.size(); ++i) {
    const Shade& s = shades[i];
    const double ym = (axis.y(s.from) + axis.y(s.to)) / 2 + 4;
    L.shade[i].text = s.what;
    L.shade[i].at = used.fit(around(s.initiator_side ? xi - 10 : xt + 10, ym, 7, 140),
                             s.initiator_side ? Anchor::end : Anchor::start, 12, true, s.what);
  }
  // Arrow labels: along the arrow, near the capture point first (towards the receiver for
  // initiator arrows, towards the sender for target ones, so crossing arrows do not share it).
  std::string last_label[2];
  std::vector<std::string> texts(arrows.size());
  for (size_t i = 0; i < arrows.size(); ++i) {
    const LadderSeg& s = *arrows[i].s;
    const bool strong = arrows[i].role == "held" || arrows[i].role == "release";
    const bool cont = s.label == "data" || s.label == "ACK";
    const int dir = s.from_initiator ? 0 : 1;
    if (strong || !cont || last_label[dir] != s.label) {
      texts[i] = s.label == "data" ? std::string(s.ours ? "data" : "…") : s.label;
      if (s.len) texts[i] += fmt::format("  {} B", s.len);
    }
    last_label[dir] = s.label;
  }
  auto place_arrow = [&](size_t i) {
    const Arrow& a = arrows[i];
    const LadderSeg& s = *a.s;
    const double xs = s.from_initiator ? xi : xt, xr = s.from_initiator ? xt : xi;
    const double ys0 = axis.y(a.send), yc = axis.y(a.cap), yr = axis.y(a.arr);
    auto y_at = [&](double x) {  // on the polyline sender -> capture point -> receiver
      const bool first_leg = s.from_initiator ? x <= xc : x >= xc;
      if (first_leg) return ys0 + (yc - ys0) * (x - xs) / (std::fabs(xc - xs) < 1 ? 1 : (xc - xs));
      return yc + (yr - yc) * (x - xc) / (std::fabs(xr - xc) < 1 ? 1 : (xr - xc));
    };
    const double xm = std::clamp(xc + (s.from_initiator ? 90.0 : -90.0), xi + 60, xt - 60);
    std::vector<std::pair<double, double>> at;
    for (double dx : {0.0, -60.0, 60.0, -120.0, 120.0}) {
      const double x = std::clamp(xm + dx, xi + 70, xt - 70);
      at.emplace_back(x, y_at(x) - 4);
      at.emplace_back(x, y_at(x) + 13);
    }
    const bool strong = a.role == "held" || a.role == "release";
    L.label[i].text = texts[i];
    L.label[i].at = used.fit(at, Anchor::middle, 11, strong, texts[i]);
  };
  for (size_t i = 0; i < arrows.size(); ++i)
    if (!texts[i].empty() && (arrows[i].role == "held" || arrows[i].role == "release")) place_arrow(i);
  const auto& breaks = axis.breaks();
  for (size_t i = 0; i < breaks.size(); ++i) {
    const Break& b = breaks[i];
    L.brk[i].text = fmt::format("… {} idle, not to scale …", ms_text(double(b.ns) / 1e6));
    const double ym = (b.y0 + b.y1) / 2 + 4;
    std::vector<std::pair<double, double>> at;
    for (double x : {(xi + xt) / 2, (xi + xt) / 2 - 90, (xi + xt) / 2 + 90})
      for (const auto& p : around(x, ym, 5, 15))
        at.push_back(p);
    L.brk[i].at = used.fit(at, Anchor::middle, 11, false, L.brk[i].text);
  }
  for (size_t i = 0; i < arrows.size(); ++i) {
    const LadderSeg& s = *arrows[i].s;
    if (!s.elided_before) continue;
    L.elided[i].text =
        fmt::format("… {} segment{} not drawn", count_text(s.elided_before), s.elided_before == 1 ? "" : "s");
    const double yc = axis.y(arrows[i].cap);
    L.elided[i].at = used.fit(around(12, yc - axis.elided_spacing() / 2 + 4, 3, 9), Anchor::start, 11, false,
                              L.elided[i].text);
  }
  if (r.elided_after)
    used.take(text_box((xi + xt) / 2, bottom - 8, Anchor::middle, 12, false,
                       fmt::format("… {} more segments not drawn …", count_text(r.elided_after))));
  for (size_t i = 0; i < arrows.size(); ++i)
    if (!texts[i].empty() && !(arrows[i].role == "held" || arrows[i].role == "release")) place_arrow(i);
  return L;
}

void draw_shades(std::string& o, std::string_view pfx, const std::vector<Shade>& shades, const TimeAxis& axis,
                 const Layout& L) {
  for (size_t i = 0; i < shades.size(); ++i) {
    const Shade& s = shades[i];
    const double y0 = axis.y(s.from), y1 = axis.y(s.to);
    const double x = s.initiator_side ? kInitiatorX : kTargetX - 46;
    put(o,
        "<g id=\"{}-w{}\" data-role=\"{}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"46\" "
        "height=\"{}\" fill=\"{}\" opacity=\"0.85\"/>",
        pfx, i, s.role, esc(s.what), num(x), num(y0), num(std::max(1.0, y1 - y0)), s.fill);
    if (const auto& at = L.shade[i].at)
      put(o, "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"#7a5b00\" font-weight=\"bold\">{}</text>",
          num(at->first), num(at->second), s.initiator_side ? "end" : "start", esc(s.what));
    o += "</g>\n";
  }
}

void draw_breaks(std::string& o, const TimeAxis& axis, const Layout& L) {
  const double xi = kInitiatorX, xt = kTargetX;
  const auto& breaks = axis.breaks();
  for (size_t i = 0; i < breaks.size(); ++i) {
    const Break& b = breaks[i];
    const double ym = (b.y0 + b.y1) / 2;
    put(o,
        "<g data-role=\"break\"><title>{3}</title><path d=\"M{0},{2} l8,-5 l8,10 l8,-5 M{1},{2} l-8,-5 "
        "l-8,10 "
        "l-8,-5\" stroke=\"#999\" fill=\"none\" transform=\"translate(-12,0)\"/>",
        num(xi), num(xt + 24), num(ym), esc(L.brk[i].text));
    if (const auto& at = L.brk[i].at)
      put(o,
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\" font-size=\"11\" stroke=\"#fff\" "
          "stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
          num(at->first), num(at->second), esc(L.brk[i].text));
    o += "</g>\n";
  }
}

// Each arrow as a <g class="seg"> (data-frame, data-role), with its label, its frame and time at
// the left, and the round trip it completes. A run of continuation segments or of pure ACKs is
// named once per direction.
void draw_arrow(std::string& o, std::string_view pfx, const Arrow& a, const TimeAxis& axis,
                const CapturePoint& cp, const Layout& L, size_t i) {
  const double xi = kInitiatorX, xt = kTargetX, xc = cp.x;
  const LadderSeg& s = *a.s;
  const Style st = style_of(a.role);
  const double xs = s.from_initiator ? xi : xt, xr = s.from_initiator ? xt : xi;
  const double ys0 = axis.y(a.send), yc = axis.y(a.cap), yr = axis.y(a.arr);
  if (const auto& at = L.elided[i].at)
    put(o,
        "<text x=\"{}\" y=\"{}\" fill=\"#888\" font-style=\"italic\" font-size=\"11\" "
        "data-role=\"elided\">{}</text>\n",
        num(at->first), num(at->second), esc(L.elided[i].text));
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
  const bool strong = a.role == "held" || a.role == "release";
  if (const auto& at = L.label[i].at)
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{}\"{} "
        "stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
        num(at->first), num(at->second), a.role == "other" ? "#999" : st.color,
        strong ? " font-weight=\"bold\"" : "", esc(L.label[i].text));
  // Frame and capture time at the left.
  put(o,
      "<text x=\"12\" y=\"{0}\" fill=\"#555\" font-size=\"11\">#{1}</text>"
      "<text x=\"{4}\" y=\"{0}\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">{2}{3:.3f} ms</text>",
      num(yc + 4), s.frame, tm >= 0 ? "+" : "", tm, num(L.time_x));
  if (const auto& at = L.tag[i].at)
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"{}\" font-weight=\"bold\" "
        "font-size=\"11\">{}</text>",
        num(at->first), num(at->second), s.from_initiator ? "end" : "start", st.color, L.tag[i].text);
  if (a.rt)
    put(o,
        "<g data-role=\"round-trip\" data-rt=\"{0}\"><circle cx=\"{1}\" cy=\"{2}\" r=\"9\" "
        "fill=\"#264653\"/>"
        "<text x=\"{1}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#fff\" font-size=\"11\" "
        "font-weight=\"bold\">{0}</text></g>",
        a.rt, num(L.rt_x[i]), num(yr), num(yr + 4));
  o += "</g>\n";
}

// What each colour and mark of this ladder means (only those drawn), wrapped to the width.
// Returns the height used.
double draw_legend(std::string& o, double bottom, const ConnectionInfo& k, const CapturePoint& cp,
                   const std::set<std::string>& roles, bool draw) {
  struct Item {
    const char* role;
    const char* text;
    char shape;  // l: line, b: box, c: circle
  };
  static const Item items[] = {{"command", "this command", 'l'},
                               {"held", "held segment", 'l'},
                               {"release", "releasing ACK", 'l'},
                               {"small", "earlier small segment", 'l'},
                               {"retransmission", "retransmission", 'l'},
                               {"original", "original (resent)", 'l'},
                               {"ack", "pure ACK", 'l'},
                               {"other", "other commands", 'l'},
                               {"delayed-ack-wait", "delayed-ACK wait", 'b'},
                               {"hold-wait", "held / waiting", 'b'},
                               {"think", "target think", 'b'},
                               {"loss-wait", "loss recovery", 'b'},
                               {"vantage", "capture point", 'l'},
                               {"round-trip", "round trip completed", 'c'}};
  double lx = 12, ly = bottom + 28;
  for (const Item& it : items) {
    if (!roles.count(it.role)) continue;
    const double w = 32 + text_box(0, 0, Anchor::start, 11, false, it.text).x1;
    if (lx + w > kWidth - 8) lx = 12, ly += 18;
    if (draw) {
      put(o, "<g data-legend=\"{}\">", it.role);
      if (it.shape == 'b')
        put(o, "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"{}\"/>", num(lx), num(ly - 9),
            wait_fill(it.role));
      else if (it.shape == 'c')
        put(o, "<circle cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"#264653\"/>", num(lx + 9), num(ly - 4));
      else {
        const Style st =
            std::string_view(it.role) == "vantage" ? Style{"#2a9d8f", 1.5, "6 4"} : style_of(it.role);
        put(o, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>", num(lx),
            num(ly - 4), num(lx + 18), num(ly - 4), st.color, num(std::max(2.0, st.width)),
            *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "");
      }
      put(o, "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text></g>", num(lx + 23), num(ly), it.text);
    }
    lx += w;
  }
  if (draw)
    put(o,
        "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Left: frame, and when the capture "
        "point saw it (dot), from the command's first frame.</text>"
        "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">Arrows leave and reach each side half "
        "a measured round trip from the capture point:</text>"
        "\n<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">RTT {}, capture point ↔ initiator {}, ↔ "
        "target {}.</text>\n",
        num(ly + 20), num(ly + 35), num(ly + 50), ms_text(k.rtt_ms), ms_text(cp.rtt_i), ms_text(cp.rtt_t));
  return ly + 60 - bottom;
}

}  // namespace

std::string render_ladder(const LadderRequest& r, std::string_view pfx, bool standalone) {
  const CapturePoint cp = place_capture_point(r.conn);
  std::vector<Arrow> arrows = make_arrows(r, cp);
  number_round_trips(arrows, r.command);
  const std::vector<Shade> shades = make_shades(r.findings, arrows);
  // The command's end: its status, or without one its last segment or evidence frame drawn.
  int64_t end = r.command.status_frame ? r.command.status_ns - r.command.first_ns : 0;
  if (!r.command.status_frame)
    for (const Arrow& a : arrows)
      if (a.s->ours || (a.role != "other" && a.role != "ack")) end = std::max(end, a.cap);
  const TimeAxis axis(arrows, shades, end, cp.to_initiator_ns + cp.to_target_ns);
  const double bottom = axis.last_y() + 30;
  std::set<std::string> roles{"vantage"};
  for (const Arrow& a : arrows) {
    roles.insert(a.role);
    if (a.rt) roles.insert("round-trip");
  }
  for (const Shade& s : shades)
    roles.insert(s.role);
  const Layout L = place_labels(arrows, shades, axis, cp, r, bottom);

  std::string o;
  draw_head(o, r, pfx, standalone, bottom + draw_legend(o, bottom, r.conn, cp, roles, false));
  draw_title(o, r.command);
  draw_lanes(o, pfx, r.conn, cp, bottom);
  draw_shades(o, pfx, shades, axis, L);
  draw_breaks(o, axis, L);
  for (size_t i = 0; i < arrows.size(); ++i)
    draw_arrow(o, pfx, arrows[i], axis, cp, L, i);
  if (r.elided_after)
    put(o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\" font-style=\"italic\">… {} more "
        "segments not drawn …</text>\n",
        num((kInitiatorX + kTargetX) / 2), num(bottom - 8), count_text(r.elided_after));
  if (r.findings_not_drawn)  // said outside the drawing (the HTML caption); kept here for tools
    put(o, "<desc data-role=\"evidence-elided\" data-findings=\"{}\">evidence of the first {} findings drawn; {} more in "
        "the report</desc>\n",
        r.findings_not_drawn, kLadderEvidenceFindings, r.findings_not_drawn);
  draw_legend(o, bottom, r.conn, cp, roles, true);
  o += "</svg>\n";
  return o;
}

}  // namespace iscsi_doctor::cli
