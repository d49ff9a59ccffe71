// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor --html FILE`: one self-contained HTML file (inline SVG and CSS, no script, nothing
// fetched) with the text report's findings and fixes, ladder diagrams of each finding kind's worst
// commands, latency histograms/CDFs per command class against 1-3 measured round trips, breakdown
// bars, queue depth and throughput over time, and the LBA access pattern. Written as polyglot
// XHTML (every element closed, only XML's own entities), so tests can parse it with an XML parser
// as well as open it in a browser.
//
// A report of the pipeline (pipeline.hpp) like the others. Per capture, in the thread analysing
// it: while the engine reports, the commands and findings are aggregated into fixed bins (charts)
// and a few picked commands (ladders); once the capture is analysed, a second pass re-reads the
// file up to the picked commands and re-analyses their connections (collect_ladders), and the
// capture's section is written to the deferred stream. At the end the page opens with the summary
// of all captures and the gate, and the sections follow. Memory and output size do not grow with the number
// of packets.
#include "reports/report.hpp"
#include "reports/root_causes.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "reports/formatting.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/summary.hpp"
#include "commands/ladder.hpp"
#include "drawing/svg.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;
using svg::num;

constexpr size_t kSlowest = finding_kind_count;  // pick slot for "slowest commands"
constexpr size_t kPendingCap = 200000;           // findings waiting for their command
constexpr size_t kClassesDrawn = 8;              // latency charts per capture
constexpr size_t kBreakdownRows = 12;
constexpr size_t kScatterPoints = 2000;
constexpr size_t kReorder = 64;  // commands re-ordered by first frame for LBA gaps
constexpr int kGapBins = 48;     // |gap| up to 2^47 bytes, per sign

// ---- First pass: aggregates ----------------------------------------------------------------------

struct ClassAgg {
  svg::LogHistogram hist;
  Breakdown sum;
  uint64_t n = 0;
};

struct Pick {
  double score = 0;
  LadderRequest req;
  // Completed commands rank first: the findings table counts those, and an unanswered command's
  // score runs to the end of the capture.
  bool before(const Pick& o) const {
    return req.command.completed != o.req.command.completed ? req.command.completed : score > o.score;
  }
};

struct LbaState {
  struct Item {
    uint64_t first_frame;
    uint64_t lba;
    uint32_t bytes;
    bool operator>(const Item& o) const { return first_frame > o.first_frame; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pending;
  bool have_prev = false;
  uint64_t prev_lba = 0;
  uint32_t prev_bytes = 0;
};

struct Aggregates {
  RootCauses roots;  // for advice that fits the device (a tape drive's or changer's mechanical work)
  std::map<std::pair<char, uint32_t>, ClassAgg> classes;
  svg::TimeBins time;  // series 0: commands in flight (ns), 1: bytes read, 2: bytes written
  // Gap between consecutive commands' LBAs, as bytes, for 512- and 4096-byte blocks (the block
  // size is not on the wire; the one that makes more accesses sequential is shown).
  std::array<std::array<uint64_t, 2 * kGapBins + 1>, 2> gaps{};
  std::array<uint64_t, 2> sequential{};
  uint64_t gap_pairs = 0;
  std::map<uint32_t, LbaState> lba;
  struct Point {
    int64_t t;
    uint64_t lba;
    char kind;
  };
  std::vector<Point> scatter;
  uint64_t scatter_seen = 0, scatter_stride = 1;
  uint64_t max_lba = 0;
  std::array<std::vector<Pick>, finding_kind_count + 1> picks;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Finding>> pending;
  int64_t first_ns = 0;
  bool have_first = false;
};

// Bin of a gap of `bytes` (backwards when `back`): LBAs are 64-bit and corrupt or hostile ones
// reach 2^64-1, so the gap is kept as a sign and a 128-bit magnitude, never a signed 64-bit value.
__extension__ typedef unsigned __int128 u128;
int gap_bin(bool back, u128 bytes) {
  if (bytes == 0) return kGapBins;
  int bits = 0;
  for (u128 v = bytes; v; v >>= 1)
    ++bits;  // 1 + floor(log2(bytes))
  const int b = std::min(kGapBins, bits);
  return kGapBins + (back ? -b : b);
}

double score_for(size_t kind, const CommandResult& c) {
  if (kind == kSlowest || FindingKind(kind) == FindingKind::serialized) return c.latency_ms;
  return explained_ms(FindingKind(kind), c.breakdown);
}

// The first pass's share of the HTML report: each command and finding into the aggregates.
class Aggregator {
public:
  Aggregator(Aggregates& a, size_t per_kind, Sink& notices) : a_(a), per_kind_(per_kind), notices_(notices) {}

  void first_time(int64_t t) {
    if (a_.have_first) return;
    a_.have_first = true;
    a_.first_ns = t;
    a_.time.start(t);
  }

  void command(const CommandResult& c) {
    a_.roots.add(c);
    std::vector<Finding> mine;
    if (auto it = a_.pending.find({c.connection, c.first_frame}); it != a_.pending.end()) {
      mine = std::move(it->second);
      a_.pending.erase(it);
    }
    if (c.completed) {
      ClassAgg& k = a_.classes[{c.kind, c.bytes}];
      k.hist.add(c.latency_ms);
      ++k.n;
      for (const auto& p : kBreakdownParts)
        k.sum.*p.field += c.breakdown.*p.field;
      a_.time.add_span(0, c.first_ns, c.status_ns, double(c.status_ns - c.first_ns));
      if (c.kind == 'r' || c.kind == 'w')
        a_.time.add_span(c.kind == 'r' ? 1 : 2, c.first_ns, c.status_ns, c.bytes);
    }
    if (c.lba && (c.kind == 'r' || c.kind == 'w')) lba(c);
    for (auto kind : c.findings)
      consider(size_t(kind), c, mine);
    if (c.completed && c.findings.empty()) consider(kSlowest, c, mine);
  }

  void finding(const Finding& f) {
    a_.roots.side(f.kind, f.side);
    if (!f.itt) return;
    for (auto& picks : a_.picks)  // a finding after its command: only picked ones care
      for (Pick& p : picks)
        if (p.req.command.connection == f.connection && p.req.command.first_frame == f.command_first_frame &&
            p.req.command.itt == *f.itt) {
          p.req.findings.push_back(f);
          return;
        }
    if (a_.pending.size() >= kPendingCap) {  // bounded: lose highlights, not memory
      if (!pending_cap_said_)
        notices_.on_notice(
            {Notice::Level::warning, f.frame, f.connection,
             fmt::format("HTML report's pending-findings cap ({}) hit: findings of {} commands not yet "
                         "reported are dropped; their ladders lack those highlights",
                         kPendingCap, a_.pending.size())});
      pending_cap_said_ = true;
      a_.pending.clear();
    }
    a_.pending[{f.connection, f.command_first_frame}].push_back(f);
  }

  void finish_lba() {
    for (auto& [conn, st] : a_.lba)
      while (!st.pending.empty()) {
        step(st, st.pending.top());
        st.pending.pop();
      }
  }

private:
  void consider(size_t kind, const CommandResult& c, const std::vector<Finding>& mine) {
    auto& picks = a_.picks[kind];
    Pick p;
    p.score = score_for(kind, c);
    p.req.command.completed = c.completed;
    if (picks.size() >= per_kind_ && !p.before(picks.back())) return;
    p.req.command = c;
    p.req.findings = mine;
    auto at = std::upper_bound(picks.begin(), picks.end(), p,
                               [](const Pick& a, const Pick& b) { return a.before(b); });
    picks.insert(at, std::move(p));
    if (picks.size() > per_kind_) picks.pop_back();
  }

  void lba(const CommandResult& c) {
    LbaState& st = a_.lba[c.connection];
    st.pending.push({c.first_frame, *c.lba, c.bytes});
    if (st.pending.size() > kReorder) {
      step(st, st.pending.top());
      st.pending.pop();
    }
    a_.max_lba = std::max(a_.max_lba, *c.lba);
    if (a_.scatter_seen++ % a_.scatter_stride == 0) {
      a_.scatter.push_back({c.first_ns - a_.first_ns, *c.lba, c.kind});
      if (a_.scatter.size() >= kScatterPoints) {  // keep every other point, sample half as often
        size_t j = 0;
        for (size_t i = 0; i < a_.scatter.size(); i += 2)
          a_.scatter[j++] = a_.scatter[i];
        a_.scatter.resize(j);
        a_.scatter_stride *= 2;
      }
    }
  }

  void step(LbaState& st, const LbaState::Item& it) {
    if (st.have_prev) {
      ++a_.gap_pairs;
      const uint32_t bs[2] = {512, 4096};
      for (int i = 0; i < 2; ++i) {
        const u128 expect = u128(st.prev_lba) + st.prev_bytes / bs[i];
        const bool back = u128(it.lba) < expect;
        const u128 blocks = back ? expect - it.lba : u128(it.lba) - expect;
        a_.gaps[i][size_t(gap_bin(back, blocks * bs[i]))]++;
        a_.sequential[i] += blocks == 0;
      }
    }
    st.have_prev = true;
    st.prev_lba = it.lba;
    st.prev_bytes = it.bytes;
  }

  Aggregates& a_;
  size_t per_kind_;
  Sink& notices_;
  bool pending_cap_said_ = false;
};

// ---- Drawing helpers -------------------------------------------------------------------------

using Out = std::string;

template <typename... Args>
void put(Out& o, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(o), f, std::forward<Args>(args)...);
}

const char* part_color(std::string_view part) {
  static const std::map<std::string_view, const char*> k = {
      {"request", "#8ab6d6"}, {"think", "#7fb77e"},       {"data", "#c9c9c9"},
      {"nagle", "#d62728"},   {"delayed_ack", "#f2b705"}, {"r2t", "#9467bd"},
      {"window", "#17becf"},  {"loss", "#8c564b"},        {"response", "#4a6fa5"},
      {"link", "#e377c2"}};
  auto it = k.find(part);
  return it == k.end() ? "#999" : it->second;
}

std::string ms_axis(double ms) {
  if (ms >= 1000) return fmt::format("{:g} s", ms / 1000);
  if (ms >= 1) return fmt::format("{:g} ms", ms);
  return fmt::format("{:g} µs", ms * 1000);
}

std::string bytes_axis(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 6)
    b /= 1024, ++u;
  return fmt::format("{:g} {}", std::round(b * 10) / 10, units[u]);
}

// A tick step of 1, 2 or 5 times a power of ten giving about `ticks` ticks over `range`.
double nice_step(double range, int ticks) {
  const double raw = std::max(range, 1e-12) / ticks;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// Ticks on a vertical axis from 0 to `top` (y0: the axis' y at 0, h: its height), labels
// right-aligned at x; steps of at least `min_step` (1 for counts).
void value_ticks(Out& o, double x, double y0, double h, double top, double min_step,
                 std::string_view unit = {}) {
  const double step = std::max(min_step, nice_step(top, 4));
  for (int i = 0; i * step <= top * 1.0001; ++i)
    put(o, "<text class=\"ytick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#555\">{:.6g}{}</text>",
        num(x), num(y0 - h * i * step / top + 4), i * step, unit);
}

// Ticks along a horizontal axis of `total` seconds from x0 to x1, labelled in seconds.
void seconds_ticks(Out& o, double x0, double x1, double y, double total) {
  total = std::max(total, 1e-9);
  const double step = nice_step(total, 5);
  for (int i = 0; i * step <= total * 1.0001; ++i)
    put(o, "<text class=\"xtick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{:.3g} s</text>",
        num(x0 + (x1 - x0) * i * step / total), num(y), i * step);
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count_text(n), n == 1 ? one : many);
}

std::string class_name(char kind, uint32_t bytes) {
  return fmt::format("{} {}", command_kind_name(kind), size_text(bytes));
}

// Latency histogram (bars) and CDF (line) on a log axis, with 1-3 round trips marked.
void latency_chart(Out& o, const std::string& id, char kind, uint32_t bytes, const ClassAgg& k,
                   const ClassStats* st, double rtt_ms) {
  const double W = 460, H = 230, L = 46, R = 40, T = 34, B = 34;
  const auto& h = k.hist;
  int lo = svg::LogHistogram::kBins, hi = -1;
  uint64_t peak = 0;
  for (int i = 0; i < svg::LogHistogram::kBins; ++i)
    if (h.bins[size_t(i)])
      lo = std::min(lo, i), hi = std::max(hi, i), peak = std::max(peak, h.bins[size_t(i)]);
  if (hi < 0) return;
  double xmin = svg::LogHistogram::edge_ms(lo), xmax = svg::LogHistogram::edge_ms(hi + 1);
  if (rtt_ms > 0) xmin = std::min(xmin, rtt_ms * 0.7), xmax = std::max(xmax, rtt_ms * 3.4);
  xmin = std::pow(10, std::floor(std::log10(xmin)));
  xmax = std::pow(10, std::ceil(std::log10(xmax)));
  const double lx0 = std::log10(xmin), lx1 = std::log10(xmax);
  auto X = [&](double ms) { return L + (W - L - R) * (std::log10(std::max(ms, 1e-9)) - lx0) / (lx1 - lx0); };
  auto Yc = [&](double f) { return H - B - (H - T - B) * f; };
  put(o,
      "<svg class=\"latency-chart\" id=\"{}\" data-kind=\"{}\" data-bytes=\"{}\" data-rtt-ms=\"{:.3f}\" "
      "width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">",
      id, command_kind_name(kind), bytes, rtt_ms, num(W), num(H), num(W), num(H));
  put(o, "<text x=\"{}\" y=\"14\" font-weight=\"bold\" font-size=\"12\">{}</text>", num(L),
      esc(class_name(kind, bytes)));
  if (st)
    put(o,
        "<text x=\"{}\" y=\"27\" fill=\"#555\">{} · median {} · p90 {} · {:g} RT (ideal {})</text>",
        num(L), plural(st->commands, "command", "commands"), ms_text(st->median_ms), ms_text(st->p90_ms), st->median_round_trips,
        st->ideal_round_trips);
  // Decade grid.
  for (double d = xmin; d <= xmax * 1.0001; d *= 10) {
    put(o,
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#eee\"/><text class=\"xtick\" x=\"{0}\" "
        "y=\"{3}\" text-anchor=\"middle\" fill=\"#555\">{4}</text>",
        num(X(d)), num(T), num(H - B), num(H - B + 14), ms_axis(d));
  }
  put(o, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999\"/>", num(L), num(H - B),
      num(W - R));
  put(o, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">latency (log scale)</text>",
      num((L + W - R) / 2), num(H - 4));
  // Bars.
  for (int i = lo; i <= hi; ++i) {
    const uint64_t n = h.bins[size_t(i)];
    if (!n) continue;
    const double x0 = X(svg::LogHistogram::edge_ms(i)), x1 = X(svg::LogHistogram::edge_ms(i + 1));
    const double y = H - B - (H - T - B) * double(n) / double(peak);
    put(o,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#8ab6d6\"><title>{} – {}: {}"
        "</title></rect>",
        num(x0 + 0.5), num(y), num(std::max(1.0, x1 - x0 - 1)), num(H - B - y),
        ms_text(svg::LogHistogram::edge_ms(i)), ms_text(svg::LogHistogram::edge_ms(i + 1)),
        plural(n, "command", "commands"));
  }
  // CDF, stepping at each bin's upper edge.
  std::string pts = fmt::format("{},{}", num(X(svg::LogHistogram::edge_ms(lo))), num(Yc(0)));
  uint64_t cum = 0;
  for (int i = lo; i <= hi; ++i) {
    cum += h.bins[size_t(i)];
    pts += fmt::format(" {},{}", num(X(svg::LogHistogram::edge_ms(i + 1))),
                       num(Yc(double(cum) / double(h.total))));
  }
  put(o, "<polyline class=\"cdf\" points=\"{}\" fill=\"none\" stroke=\"#264653\" stroke-width=\"1.8\"/>",
      pts);
  for (int p : {0, 50, 100})
    put(o, "<text x=\"{}\" y=\"{}\" fill=\"#264653\">{}%</text>", num(W - R + 4), num(Yc(p / 100.0) + 4), p);
  value_ticks(o, L - 4, H - B, H - T - B, double(peak), 1);
  put(o,
      "<text x=\"12\" y=\"{0}\" fill=\"#555\" text-anchor=\"middle\" transform=\"rotate(-90 12 {0})\">"
      "commands</text>",
      num((T + H - B) / 2));
  // 1, 2, 3 round trips.
  if (rtt_ms > 0)
    for (int n = 1; n <= 3; ++n) {
      const double x = X(rtt_ms * n);
      put(o,
          "<g data-role=\"rtt-line\" data-rt=\"{0}\"><line x1=\"{1}\" y1=\"{2}\" x2=\"{1}\" y2=\"{3}\" "
          "stroke=\"#e76f51\" "
          "stroke-dasharray=\"4 3\" stroke-width=\"1.4\"/><text x=\"{4}\" y=\"{5}\" fill=\"#e76f51\">{0} "
          "RT</text></g>",
          n, num(x), num(T + 8), num(H - B), num(x + 3), num(T + 8 + 12 * (n - 1)));
    }
  o += "</svg>\n";
}

void breakdown_chart(Out& o, const std::string& id,
                     const std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>>& rows) {
  if (rows.empty()) return;
  const double W = 940, L = 150, R = 90, row = 24, T = 34;
  const double H = T + row * double(rows.size()) + 10;
  double maxv = 0;
  for (const auto& [key, k] : rows) {
    double t = 0;
    for (const auto& p : kBreakdownParts)
      t += k->sum.*p.field / double(k->n);
    maxv = std::max(maxv, t);
  }
  if (maxv <= 0) maxv = 1;
  put(o,
      "<svg class=\"breakdown-chart\" id=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">",
      id, num(W), num(H), num(W), num(H));
  double lx = L;
  for (const auto& p : kBreakdownParts) {
    put(o, "<rect x=\"{}\" y=\"6\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"16\">{}</text>",
        num(lx), part_color(p.name), num(lx + 16), p.name);
    lx += 26 + 6.5 * double(p.name.size());
  }
  double y = T;
  for (const auto& [key, k] : rows) {
    put(o, "<g data-class=\"{}\"><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} ({})</text>",
        esc(class_name(key.first, key.second)), num(L - 6), num(y + 15),
        esc(class_name(key.first, key.second)), count_text(k->n));
    double x = L, total = 0;
    for (const auto& p : kBreakdownParts) {
      const double v = k->sum.*p.field / double(k->n);
      total += v;
      const double w = (W - L - R) * v / maxv;
      if (w < 0.3) continue;
      put(o,
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {} mean</title></rect>",
          num(x), num(y + 3), num(w), num(row - 6), part_color(p.name), p.name, ms_text(v));
      x += w;
    }
    put(o, "<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text></g>", num(x + 5), num(y + 15), ms_text(total));
    y += row;
  }
  o += "</svg>\n";
}

// rate_mbs: the path's rate each way as the connections' ACKs showed it (docs/rules.md "The link"),
// read (to the initiator) then write, MB/s; 0: none measured.
void timeline_chart(Out& o, const std::string& id, const svg::TimeBins& tb, const double (&rate_mbs)[2]) {
  const size_t n = tb.used();
  if (n == 0) return;
  const double w_s = double(tb.width_ns) / 1e9;
  double qmax = 0, bmax = 0;
  for (size_t i = 0; i < n; ++i) {
    qmax = std::max(qmax, tb.v[i][0] / double(tb.width_ns));
    bmax = std::max({bmax, tb.v[i][1] / w_s / 1e6, tb.v[i][2] / w_s / 1e6});
  }
  const bool throughput = bmax > 0;  // no reads or writes with data: no empty plot
  if (qmax <= 0) qmax = 1;
  const double W = 940, L = 70, R = 20, ph = 110, gap = 34, T = 22;
  const double H = T + ph + (throughput ? gap + ph : 0) + 34;
  const double bw = (W - L - R) / double(n);
  put(o,
      "<svg class=\"timeline-chart\" id=\"{}\" data-bins=\"{}\" data-bin-ms=\"{:g}\" width=\"{}\" "
      "height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">",
      id, n, double(tb.width_ns) / 1e6, num(W), num(H), num(W), num(H));
  // Queue depth: mean number of commands in flight per bin.
  const double y0 = T + ph;
  put(o,
      "<text x=\"{}\" y=\"14\" font-weight=\"bold\">commands in flight (mean per {} bin; max {:.2f})</text>",
      num(L), ms_text(double(tb.width_ns) / 1e6), qmax);
  std::string d = fmt::format("M{},{}", num(L), num(y0));
  for (size_t i = 0; i < n; ++i) {
    const double q = tb.v[i][0] / double(tb.width_ns);
    const double y = y0 - ph * q / qmax;
    d += fmt::format(" L{},{} L{},{}", num(L + bw * double(i)), num(y), num(L + bw * double(i + 1)), num(y));
  }
  d += fmt::format(" L{},{} Z", num(L + bw * double(n)), num(y0));
  put(o, "<path d=\"{}\" fill=\"#8ab6d6\" stroke=\"#4a6fa5\" stroke-width=\"1\"/>", d);
  put(o, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999\"/>", num(L), num(y0), num(W - R));
  value_ticks(o, L - 4, y0, ph, qmax, 0);
  double axis_y = y0;
  if (throughput) {  // read and write
    const double y1 = y0 + gap + ph;
    put(o,
        "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">throughput (MB/s): <tspan "
        "fill=\"#1f6fd0\">read</tspan> "
        "<tspan fill=\"#e76f51\">write</tspan></text>",
        num(L), num(y0 + gap - 8));
    for (size_t k = 1; k <= 2; ++k) {
      std::string pts;
      for (size_t i = 0; i < n; ++i)
        pts += fmt::format("{}{},{}", i ? " " : "", num(L + bw * (double(i) + 0.5)),
                           num(y1 - ph * tb.v[i][k] / w_s / 1e6 / bmax));
      put(o, "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>", pts,
          k == 1 ? "#1f6fd0" : "#e76f51");
    }
    put(o, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999\"/>", num(L), num(y1),
        num(W - R));
    // The path's rate as a dashed line where the throughput comes near it (a link at its limit);
    // far above, it is said in words (small I/O on a fast link would be a flat line under it).
    for (size_t k = 0; k < 2; ++k) {
      const double rate = rate_mbs[k];
      if (rate <= 0) continue;
      if (rate <= 2 * bmax) {
        const double y = y1 - ph * std::min(rate / bmax, 1.0);
        put(o,
            "<line class=\"path-rate\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" "
            "stroke-dasharray=\"5,3\"><title>path rate {4}: {5:.1f} MB/s (fastest ACK train; at least)</title></line>",
            num(L), num(y), num(W - R), k == 0 ? "#1f6fd0" : "#e76f51", k == 0 ? "to the initiator (reads)" : "to the target (writes)", rate);
        if (rate > bmax)
          put(o, "<text x=\"{}\" y=\"{}\" fill=\"#555\">path rate {}: {:.1f} MB/s (above)</text>", num(W - R - 250),
              num(y1 - ph + 12 + 12 * double(k)), k == 0 ? "reads" : "writes", rate);
      } else {
        put(o, "<text class=\"path-rate\" x=\"{}\" y=\"{}\" fill=\"#555\">path rate {}: {:.1f} MB/s, far above</text>",
            num(W - R - 250), num(y1 - ph + 12 + 12 * double(k)), k == 0 ? "reads" : "writes", rate);
      }
    }
    value_ticks(o, L - 4, y1, ph, bmax, 0, " MB/s");
    axis_y = y1;
  }
  // Time axis in seconds from the first segment.
  seconds_ticks(o, L, W - R, axis_y + 14, w_s * double(n));
  put(o,
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">time from the first segment (command "
      "spans spread over bins)</text>",
      num((L + W - R) / 2), num(axis_y + 28));
  o += "</svg>\n";
}

void gap_chart(Out& o, const std::string& id, const Aggregates& a) {
  if (!a.gap_pairs) return;
  const int bsi = a.sequential[1] > a.sequential[0] ? 1 : 0;
  const uint32_t bs = bsi ? 4096 : 512;
  const auto& g = a.gaps[size_t(bsi)];
  int lo = 2 * kGapBins, hi = 0;
  uint64_t peak = 0;
  for (int i = 0; i <= 2 * kGapBins; ++i)
    if (g[size_t(i)]) lo = std::min(lo, i), hi = std::max(hi, i), peak = std::max(peak, g[size_t(i)]);
  lo = std::min(lo, kGapBins - 1), hi = std::max(hi, kGapBins + 1);
  const double W = 460, H = 230, L = 46, R = 12, T = 34, B = 46;
  const double bw = (W - L - R) / double(hi - lo + 1);
  const double seq_pct = 100.0 * double(a.sequential[size_t(bsi)]) / double(a.gap_pairs);
  put(o,
      "<svg class=\"gap-chart\" id=\"{}\" data-sequential-pct=\"{:.1f}\" data-block-size=\"{}\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">",
      id, seq_pct, bs, num(W), num(H), num(W), num(H));
  put(o,
      "<text x=\"{}\" y=\"14\" font-weight=\"bold\" font-size=\"12\">LBA gap to the previous command</text>",
      num(L));
  put(o,
      "<text x=\"{}\" y=\"27\" fill=\"#555\">{:.1f}% sequential of {} pairs ({}-byte blocks assumed)</text>",
      num(L), seq_pct, count_text(a.gap_pairs), bs);
  for (int i = lo; i <= hi; ++i) {
    const uint64_t n = g[size_t(i)];
    const double x = L + bw * double(i - lo);
    const int b = i - kGapBins;
    if (n) {
      const double y = H - B - (H - T - B) * double(n) / double(peak);
      const std::string range =
          b == 0 ? std::string("sequential (gap 0)")
                 : fmt::format("gap {}{} to {}{}", b < 0 ? "-" : "+",
                               bytes_axis(std::ldexp(1.0, std::abs(b) - 1)), b < 0 ? "-" : "+",
                               bytes_axis(std::ldexp(1.0, std::abs(b))));
      put(o, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {}</title></rect>",
          num(x + 0.5), num(y), num(std::max(1.0, bw - 1)), num(H - B - y), b == 0 ? "#2a9d8f" : "#b07aa1",
          range, n);
    }
    // 0, both ends, and every tenth bin clear of the ends.
    if (b == 0 || i == lo || i == hi ||
        (std::abs(b) % 10 == 1 && std::abs(b) > 1 && i - lo > 3 && hi - i > 3))
      put(o, "<text class=\"xtick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>",
          num(x + bw / 2), num(H - B + 14),
          b == 0 ? std::string("0")
                 : fmt::format("{}{}", b < 0 ? "-" : "+", bytes_axis(std::ldexp(1.0, std::abs(b) - 1))));
  }
  put(o, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999\"/>", num(L), num(H - B),
      num(W - R));
  put(o,
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">backward ← gap in bytes (log) → "
      "forward</text>",
      num((L + W - R) / 2), num(H - 16));
  value_ticks(o, L - 4, H - B, H - T - B, double(peak), 1);
  o += "</svg>\n";
}

void scatter_chart(Out& o, const std::string& id, const Aggregates& a, int64_t duration_ns) {
  if (a.scatter.empty()) return;
  const double W = 460, H = 230, L = 70, R = 12, T = 22, B = 34;
  const double tmax = double(std::max<int64_t>(duration_ns, 1));
  const double lmax = double(std::max<uint64_t>(a.max_lba, 1));
  std::string rd, wr;
  for (const auto& p : a.scatter) {
    const double x = L + (W - L - R) * double(std::max<int64_t>(p.t, 0)) / tmax;
    const double y = H - B - (H - T - B) * double(p.lba) / lmax;
    (p.kind == 'r' ? rd : wr) += fmt::format("M{},{}h1.5", num(x), num(y));
  }
  put(o,
      "<svg class=\"lba-chart\" id=\"{}\" data-points=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} "
      "{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">",
      id, a.scatter.size(), num(W), num(H), num(W), num(H));
  put(o,
      "<text x=\"{}\" y=\"14\" font-weight=\"bold\" font-size=\"12\">LBA over time (<tspan "
      "fill=\"#1f6fd0\">read</tspan>, "
      "<tspan fill=\"#e76f51\">write</tspan>; {} sampled)</text>",
      num(L), count_text(a.scatter.size()));
  put(o, "<path d=\"{}\" stroke=\"#1f6fd0\" stroke-width=\"2\" stroke-linecap=\"round\"/>", rd);
  put(o, "<path d=\"{}\" stroke=\"#e76f51\" stroke-width=\"2\" stroke-linecap=\"round\"/>", wr);
  put(o,
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999\"/><line x1=\"{0}\" y1=\"{3}\" "
      "x2=\"{0}\" "
      "y2=\"{1}\" stroke=\"#999\"/>",
      num(L), num(H - B), num(W - R), num(T));
  put(o,
      "<text class=\"ytick\" x=\"{}\" y=\"{}\" fill=\"#555\">LBA {}</text><text "
      "class=\"ytick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#555\">0</text>",
      num(L + 4), num(T + 8), a.max_lba, num(L - 4), num(H - B + 4));
  seconds_ticks(o, L, W - R, H - B + 14, tmax / 1e9);
  put(o,
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">LBA by the command's issue time</text>",
      num((L + W - R) / 2), num(H - 4));
  o += "</svg>\n";
}

// ---- Page ----------------------------------------------------------------------------------------

constexpr const char* kCss = R"(
body { font-family: system-ui, sans-serif; margin: 0; color: #222; background: #f6f7f9; }
header { background: #264653; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 22px; }
header p { margin: 4px 0 0; opacity: 0.85; }
main { padding: 8px 24px 40px; max-width: 1400px; }
section.capture, section.all { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 18px 16px; margin: 16px 0; }
h2 { font-size: 18px; margin: 12px 0 4px; word-break: break-all; }
h3 { font-size: 16px; margin: 20px 0 6px; border-bottom: 1px solid #eee; padding-bottom: 3px; }
h4 { font-size: 14px; margin: 14px 0 4px; }
.facts { color: #444; margin: 2px 0 8px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0; max-width: 100%; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 8px; text-align: left; vertical-align: top; }
td.note, td.wrap { overflow-wrap: anywhere; }
table.connections { font-size: 12px; }
table.connections th, table.connections td { padding: 3px 5px; }
th { background: #f0f2f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table:not(.connections) td.n { white-space: nowrap; }
.fix { color: #1d5e3a; }
p.small { font-size: 13px; margin: 2px 0 6px; }
summary { cursor: pointer; color: #264653; font-size: 13px; }
.kind { font-family: monospace; font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 10px; }
.charts svg, figure svg { background: #fff; border: 1px solid #e4e4e4; border-radius: 4px; }
figure { margin: 8px 0 16px; overflow-x: auto; }
figcaption { font-size: 13px; color: #444; margin-bottom: 4px; }
.gate-ok { color: #1d5e3a; font-weight: bold; }
.gate-bad { color: #b00020; font-weight: bold; }
.note { color: #666; font-size: 13px; }
details pre { font-size: 12px; background: #f6f7f9; padding: 8px; overflow-x: auto; }
nav a { margin-right: 12px; }
)";

void advice_table(Out& o, const Summary& s, bool evidence, const std::string& anchor_prefix,
                  const std::set<size_t>& with_ladders, double floor_ms = 0,
                  const std::vector<RootCause>& roots = {}) {
  const auto advice = s.advice();
  if (advice.empty()) {
    put(o, "<p>{}</p>\n", s.commands() ? "No findings." : "No findings (no SCSI commands).");
    return;
  }
  put(o,
      "<p class=\"note\">Time lost: {} of the {} the completed commands took, each millisecond counted once, "
      "to the cause that held it. Touched: the findings' own time, which overlaps (a Nagle hold's includes "
      "the delayed ACK that ended it).</p>\n",
      ms_text(s.exclusive_total_ms()), ms_text(s.latency_total_ms()));
  o += "<table class=\"findings\"><tr><th>#</th><th>finding</th><th>side</th><th>commands</th><th>time "
       "lost</th><th>touched</th>"
       "<th>median latency now → after fix</th><th>fix</th>";
  if (evidence) o += "<th>e.g. frames</th>";
  o += "</tr>\n";
  size_t rank = 0;
  for (const Advice& a : advice) {
    const std::string name(finding_name(a.kind));
    // A device's mechanical work has no disk behind it: no disk advice for it (#27).
    const std::string fix = device_fix(a.kind, a.fix, roots);
    const std::string cell = with_ladders.count(size_t(a.kind))
                                 ? fmt::format("<a href=\"#{}-{}\">{}</a>", anchor_prefix, name, name)
                                 : name;
    put(o,
        "<tr data-kind=\"{}\"><td class=\"n\">{}</td><td class=\"kind\">{}</td><td>{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"fix\">{}</td>",
        name, ++rank, cell, side_name(a.side), count_text(a.commands),
        a.commands ? ms_text(a.exclusive_ms) : std::string("–"), ms_text(a.lost_ms),
        a.commands ? fmt::format("{} → {}", ms_text(a.median_latency_ms),
                                 ms_text(std::max(a.median_fixed_ms, std::min(floor_ms, a.median_latency_ms))))
                   : "– (" + std::string(finding_kind(a.kind).part ? "no command waited on it" : "connection level") +
                         (a.occurrences > 1 ? fmt::format(": in {} connections, {} touched in all; the first", a.occurrences, ms_text(a.lost_ms)) : std::string()) +
                         ": " + esc(a.detail) + ")",
        esc(fix) + (a.note.empty() ? std::string() : "<br/><i>note: " + esc(a.note) + "</i>") +
            (a.inferred.empty()
                 ? std::string()
                 : "<br/><i>inferred (not in the capture): " + esc(join(a.inferred, ", ")) + "</i>"));
    if (evidence) put(o, "<td>{}</td>", frames_text(a.example_frames));
    o += "</tr>\n";
  }
  o += "</table>\n";
}

// offset_ms >= 0: a column with the median as the initiator saw it, estimated (#27).
void classes_table(Out& o, const Summary& s, double offset_ms = -1) {
  const auto classes = s.classes();
  if (classes.empty()) return;
  o += "<table "
       "class=\"classes\"><tr><th>kind</th><th>size</th><th>commands</th><th>median</th><th>p90</th><th>max</"
       "th>";
  if (offset_ms >= 0) o += "<th>median, initiator (est.)</th>";
  o += "<th>round trips median (ideal)</th></tr>\n";
  for (const ClassStats& c : classes)
    put(o,
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td>{}<td class=\"n\">{:g} ({})</td></tr>\n",
        command_kind_name(c.kind), size_text(c.bytes), count_text(c.commands), ms_text(c.median_ms),
        ms_text(c.p90_ms), ms_text(c.max_ms),
        offset_ms >= 0 ? fmt::format("<td class=\"n initiator-est\">{}</td>", ms_text(c.median_ms + offset_ms))
                       : std::string(),
        c.median_round_trips, c.ideal_round_trips);
  o += "</table>\n";
}

// Per target and LUN (Summary::luns), and per initiator when there are several: count, rates,
// latency percentiles, excess round trips.
void scope_table(Out& o, const std::vector<LunStats>& rows, std::string_view title, std::string_view cls,
                 std::string_view who, bool lun) {
  if (rows.empty()) return;
  put(o,
      "<h3>{}</h3>\n<table "
      "class=\"{}\"><tr><th>{}</th>{}<th>commands</th><th>IOPS</th><th>MB/s</th><th>p50</th>"
      "<th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>excess round trips</th><th>never "
      "answered</th></tr>\n",
      title, cls, who, lun ? "<th>LUN</th>" : "");
  for (const LunStats& l : rows)
    put(o,
        "<tr><td>{}</td>{}<td class=\"n\">{}</td><td class=\"n\">{:.1f}</td>"
        "<td class=\"n\">{:.2f}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        esc(l.target),
        lun ? fmt::format("<td class=\"n\">{}</td>",
                          l.lun == ~uint64_t(0) ? std::string("–") : std::to_string(l.lun))
            : std::string(),
        count_text(l.commands), l.iops(), l.mb_per_s(), ms_text(l.p50_ms), ms_text(l.p90_ms),
        ms_text(l.p99_ms), ms_text(l.p999_ms), ms_text(l.max_ms), count_text(l.excess_round_trips),
        count_text(l.incomplete));
  o += "</table>\n";
}

void luns_table(Out& o, const Summary& s) {
  scope_table(o, s.luns(), "Logical units", "luns", "target", true);
  const auto initiators = s.initiators();
  if (initiators.size() > 1) scope_table(o, initiators, "Initiators", "initiators", "initiator", false);
  const auto targets = s.targets();
  if (targets.size() > 1) scope_table(o, targets, "Targets", "targets", "target", false);
  const auto sessions = session_rows(s);
  if (sessions.size() > 1) scope_table(o, sessions, "Sessions", "sessions", "session (target)", false);
}

// How the SCSI commands ended (Summary::statuses).
void statuses_table(Out& o, const Summary& s) {
  const auto statuses = s.statuses();
  if (statuses.empty()) return;
  o += "<h3>How the SCSI commands ended</h3>\n<table class=\"statuses\"><tr><th>commands</th><th>status</th>"
       "<th>sense key</th><th>ASC/ASCQ</th><th>iSCSI response</th><th>e.g.</th></tr>\n";
  for (const StatusStats& st : statuses)
    put(o,
        "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>"
        "<td>ITT 0x{:08x} {}, frame {}</td></tr>\n",
        count_text(st.commands), status_words(st),
        st.sense_key >= 0 ? std::string(sense_key_name(uint8_t(st.sense_key))) : std::string("–"),
        st.sense_key >= 0 ? fmt::format("0x{:02x}/0x{:02x}", std::max(st.asc, 0), std::max(st.ascq, 0))
                          : std::string("–"),
        st.iscsi_response ? fmt::format("0x{:02x}", st.iscsi_response) : std::string("–"), st.example_itt,
        esc(st.example_op), st.example_frame);
  o += "</table>\n";
}

void connections_table(Out& o, const CaptureResult& r) {
  if (r.connections.empty()) {
    o += "<p>No iSCSI connection found (ports other than 3260? see --port).</p>\n";
    return;
  }
  o += "<table "
       "class=\"connections\"><tr><th>conn.</th><th>session</th><th>initiator</th><th>target</th><th>capture "
       "point</th>"
       "<th>RTT</th><th>to initiator</th><th>to target</th><th>MSS i/t</th><th>commands</th><th>max in "
       "flight</th>"
       "<th>negotiated keys</th></tr>\n";
  for (const ConnectionInfo& c : r.connections) {
    std::string names;
    for (const SessionInfo& s : r.sessions)
      if (s.id == c.session && (!s.initiator_name.empty() || !s.target_name.empty()))
        names = fmt::format(" ({} → {})", s.initiator_name.empty() ? "?" : s.initiator_name,
                            s.target_name.empty() ? "?" : s.target_name);
    std::string keys;
    for (const auto& [k, v] : c.keys)
      keys += fmt::format("{}{}={}", keys.empty() ? "" : " ", k, v);
    if (keys.empty()) keys = "login not captured";
    put(o,
        "<tr><td class=\"n\">{}</td><td class=\"wrap\">{}{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}/{}{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"note\">{}</td></tr>\n",
        c.id, c.session, esc(names), esc(c.initiator.str()), esc(c.target.str()), vantage_words(c.vantage),
        ms_text(c.rtt_ms), ms_text(c.rtt_initiator_ms), ms_text(c.rtt_target_ms), c.mss_initiator,
        c.mss_target, c.mss_inferred ? " (inferred)" : "", count_text(c.commands), c.max_outstanding,
        esc(keys));
  }
  o += "</table>\n";
}

// Command-weighted median of the connections' round trips: the RTT the charts measure against.
double typical_rtt(const std::vector<ConnectionInfo>& conns) {
  std::vector<std::pair<double, uint64_t>> v;
  uint64_t total = 0;
  for (const auto& c : conns)
    if (c.rtt_ms > 0) v.emplace_back(c.rtt_ms, c.commands + 1), total += c.commands + 1;
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  uint64_t acc = 0;
  for (const auto& [rtt, n] : v)
    if ((acc += n) * 2 >= total) return rtt;
  return v.back().first;
}

std::string text_report(const CaptureResult& r, const RootCauses& roots) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return {};
  ReportOptions ro;
  ro.paths = {r.path};
  make_text_report(ro, &roots)->capture_done(f, r);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

// One capture's section of the page, once the capture is analysed: its second pass, then the
// facts, findings, ladders, charts and tables.
void capture_section(const CaptureResult& r, Aggregates& agg, const ReportOptions& ro, Out& o) {
  const std::string cid = fmt::format("c{}", r.index);
  put(o, "<section class=\"capture\" id=\"{}\" data-path=\"{}\">\n<h2>{}</h2>\n", cid, esc(r.path),
      esc(r.path));
  if (!r.usable) {
    put(o, "<p class=\"gate-bad\">unusable: {}</p>\n</section>\n", esc(r.error));
    return;
  }

  // Second pass: the picked commands' segments (each command drawn once, shown under each kind).
  std::map<std::pair<uint32_t, uint64_t>, LadderRequest> unique;
  for (auto& picks : agg.picks)
    for (Pick& p : picks) {
      for (const ConnectionInfo& ci : r.connections)
        if (ci.id == p.req.command.connection) p.req.conn = ci;
      auto [it, fresh] = unique.try_emplace({p.req.command.connection, p.req.command.first_frame}, p.req);
      if (!fresh)  // merge findings known to either pick
        for (const Finding& f : p.req.findings) {
          bool have = false;
          for (const Finding& g : it->second.findings)
            have |= g.kind == f.kind && g.frame == f.frame;
          if (!have) it->second.findings.push_back(f);
        }
    }
  std::vector<LadderRequest*> reqs;
  for (auto& [key, req] : unique)
    reqs.push_back(&req);
  try {
    collect_ladders(r.read_path, ro.decoder, ro.engine, reqs);
  } catch (const CaptureError&) {
  }

  const Summary& s = *r.summary;
  const double secs = r.stats.packets ? double(r.stats.last_ns - r.stats.first_ns) / 1e9 : 0;
  put(o,
      "<p class=\"facts\">{}{}, {}, {} bytes, {} packets over {:.1f} s · {} SCSI commands, {} completed, "
      "<b>{} excess round trips</b></p>\n",
      esc(std::string(format_name(r.probe))), compression_text(r.probe.compression), esc(r.link_description),
      count_text(r.probe.size), count_text(r.stats.packets), secs, count_text(s.commands()),
      count_text(s.completed()), count_text(s.excess_round_trips()));

  std::set<size_t> with_ladders;
  for (size_t k = 0; k < finding_kind_count; ++k)
    if (!agg.picks[k].empty()) with_ladders.insert(k);
  // Where these latencies were measured (#27), and the least a command takes as seen there.
  const VantageFacts vantage = vantage_of(r);
  if (!r.connections.empty()) put(o, "<p class=\"vantage\" data-capture-point=\"{}\">{}</p>\n", vantage.capture_point, esc(vantage_sentence(vantage)));
  o += "<h3>Findings, ranked by time lost</h3>\n";
  const std::vector<RootCause> roots = agg.roots.ranked(vantage.floor_ms());
  advice_table(o, s, true, cid, with_ladders, vantage.floor_ms(), roots);

  o += "<h3>Ladder diagrams of the worst commands</h3>\n";
  o += "<p class=\"note\">Per finding kind, the commands it cost most. Initiator left, target right, the "
       "capture point "
       "dashed between them where the measured round trips place it; time runs down. Hover an arrow for its "
       "TCP "
       "header.</p>\n";
  bool any_ladder = false;
  // Each command drawn once, under the first kind that picks it; its caption names every kind it
  // illustrates, and the later kinds link to it.
  std::vector<size_t> order;
  for (const Advice& a : s.advice())
    order.push_back(size_t(a.kind));
  if (std::none_of(order.begin(), order.end(), [&](size_t k) { return !agg.picks[k].empty(); }))
    order = {kSlowest};
  auto kind_name = [](size_t k) {
    return k == kSlowest ? std::string("slowest") : std::string(finding_name(FindingKind(k)));
  };
  std::map<std::pair<uint32_t, uint64_t>, std::vector<std::string>> illustrates, kinds_of;
  for (size_t k : order)
    for (size_t i = 0; i < agg.picks[k].size(); ++i) {
      const CommandResult& c = agg.picks[k][i].req.command;
      illustrates[{c.connection, c.first_frame}].push_back(fmt::format("{} #{}", kind_name(k), i + 1));
      kinds_of[{c.connection, c.first_frame}].push_back(kind_name(k));
    }
  std::map<std::pair<uint32_t, uint64_t>, std::string> drawn;  // the ladder's id
  auto draw = [&](size_t k, const std::string& title, const std::string& fix) {
    const auto& picks = agg.picks[k];
    if (picks.empty()) return;
    any_ladder = true;
    const std::string kname = kind_name(k);
    put(o, "<h4 id=\"{}-{}\">{}</h4>\n", cid, kname, esc(title));
    if (!fix.empty()) put(o, "<p class=\"fix small\">fix: {}</p>\n", esc(fix));
    size_t rank = 0;
    for (const Pick& p : picks) {
      const std::pair<uint32_t, uint64_t> key{p.req.command.connection, p.req.command.first_frame};
      const auto it = unique.find(key);
      if (it == unique.end()) continue;
      const std::string lid = fmt::format("{}-{}-{}", cid, kname, ++rank);
      if (rank == 2)  // the worst one open, the others folded: the page stays short
        put(o, "<details><summary>{} more</summary>\n", picks.size() - 1);
      const std::string by =
          fmt::format("#{} by {} ({}){}", rank, k == kSlowest ? "latency" : "time lost to it",
                      ms_text(p.score), p.req.command.completed ? "" : ", no status seen");
      if (auto d = drawn.find(key); d != drawn.end()) {
        put(o,
            "<p class=\"note also\" data-kind=\"{}\" data-itt=\"{}\">{} · ITT {} (frame {}): drawn above "
            "under "
            "<a href=\"#{}\">{}</a></p>\n",
            kname, hex32(p.req.command.itt), by, hex32(p.req.command.itt), p.req.command.first_frame,
            d->second, esc(illustrates[key].front()));
        continue;
      }
      drawn.emplace(key, lid);
      put(o,
          "<figure data-kind=\"{}\" data-kinds=\"{}\" data-itt=\"{}\"><figcaption>{} · connection {} · "
          "illustrates {} · <code>iscsi-doctor ladder --itt {} --frame {} {}</code>{}</figcaption>\n",
          kname, join(kinds_of[key], " "), hex32(p.req.command.itt), by, p.req.command.connection,
          esc(join(illustrates[key], ", ")), hex32(p.req.command.itt), p.req.command.first_frame,
          esc(r.path),
          it->second.findings_not_drawn
              ? fmt::format(" · the evidence of its first {} findings is drawn, of {} (the others in the findings)",
                            kLadderEvidenceFindings, kLadderEvidenceFindings + it->second.findings_not_drawn)
              : std::string());
      o += render_ladder(it->second, lid, false);
      o += "</figure>\n";
    }
    if (rank >= 2) o += "</details>\n";
  };
  for (const Advice& a : s.advice())  // in the order of the findings table
    draw(size_t(a.kind),
         fmt::format("{} — {} worst command{}", finding_name(a.kind), agg.picks[size_t(a.kind)].size(),
                     agg.picks[size_t(a.kind)].size() == 1 ? "" : "s"),
         device_fix(a.kind, a.fix, roots));
  if (!any_ladder) draw(kSlowest, "No finding: the slowest commands", "");
  if (!any_ladder) o += "<p>No commands to draw.</p>\n";
  if (s.finding_counts()[size_t(FindingKind::serialized)])
    o += "<p class=\"note\">serialized is a connection-level finding: see commands in flight over time "
         "below.</p>\n";

  // Latency per class against the measured round trip.
  const double rtt = typical_rtt(r.connections);
  const auto stats = s.classes();
  std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>> rows;
  for (const auto& [key, k] : agg.classes)
    rows.emplace_back(key, &k);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second->n > b.second->n; });
  if (!rows.empty()) {
    o += "<h3>Latency per operation and size</h3>\n";
    put(o,
        "<p class=\"note\">Histogram (bars) and cumulative distribution (line) of latency as captured; "
        "dashed lines at "
        "1, 2 and 3 round trips of the measured RTT ({}, median over connections weighted by "
        "commands).</p>\n",
        ms_text(rtt));
    o += "<div class=\"charts\">\n";
    for (size_t i = 0; i < rows.size() && i < kClassesDrawn; ++i) {
      if (rows[i].second->n < 2) continue;  // one command has no distribution to draw (#27)
      const ClassStats* st = nullptr;
      for (const auto& c : stats)
        if (c.kind == rows[i].first.first && c.bytes == rows[i].first.second) st = &c;
      latency_chart(o, fmt::format("{}-lat-{}", cid, i), rows[i].first.first, rows[i].first.second,
                    *rows[i].second, st, rtt);
    }
    o += "</div>\n";
    if (rows.size() > kClassesDrawn)
      put(o, "<p class=\"note\">{} more classes in the table below.</p>\n", rows.size() - kClassesDrawn);
    o += "<h3>Where the time went: mean breakdown per command class</h3>\n";
    std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>> top(
        rows.begin(), rows.begin() + long(std::min(rows.size(), kBreakdownRows)));
    breakdown_chart(o, cid + "-breakdown", top);
    classes_table(o, s, vantage.shows_estimate() ? vantage.initiator_offset_ms() : -1);
    luns_table(o, s);
    statuses_table(o, s);
    o += "<h3>Queue depth and throughput over time</h3>\n";
    double rate_mbs[2] = {0, 0};  // the fastest path each way among the capture's connections
    for (const ConnectionInfo& ci : r.connections) {
      rate_mbs[0] = std::max(rate_mbs[0], ci.rate_to_initiator_mbit_s / 8);
      rate_mbs[1] = std::max(rate_mbs[1], ci.rate_to_target_mbit_s / 8);
    }
    timeline_chart(o, cid + "-timeline", agg.time, rate_mbs);
  }
  if (agg.gap_pairs || !agg.scatter.empty()) {
    o += "<h3>Access pattern: sequential or scattered</h3>\n<div class=\"charts\">\n";
    gap_chart(o, cid + "-gaps", agg);
    scatter_chart(o, cid + "-lba", agg, r.stats.last_ns - agg.first_ns);
    o += "</div>\n<p class=\"note\">Gap = this command's LBA minus the end of the previous command's on the "
         "same "
         "connection, in the order the commands were issued.</p>\n";
  }

  // Worst commands, linked to their diagram when there is one.
  const auto& worst = s.worst();
  if (!worst.empty()) {
    o += "<h3>Worst commands (" + std::string(worst_order_words(s.worst_order())) +
         ")</h3>\n<table "
         "class=\"worst\"><tr><th>ITT</th>"
         "<th>op</th><th>LBA</th><th>bytes</th><th>frames</th><th>latency</th><th>RT/ideal</th><th>findings</"
         "th></tr>\n";
    for (const CommandResult& c : worst) {
      std::string kinds;
      for (auto k : c.findings)
        kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", finding_name(k));
      if (!c.completed) kinds = "(no status) " + kinds;
      put(o,
          "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td "
          "class=\"n\">{}</td><td>{}-{}</td>"
          "<td class=\"n\">{}</td><td class=\"n\">{}/{}</td><td>{}</td></tr>\n",
          hex32(c.itt), esc(c.op), c.lba ? std::to_string(*c.lba) : "-", count_text(c.bytes), c.first_frame,
          c.status_frame ? std::to_string(c.status_frame) : "", c.completed ? ms_text(c.latency_ms) : "-",
          c.round_trips, c.ideal_round_trips, kinds);
    }
    o += "</table>\n";
  }
  o += "<h3>Connections</h3>\n";
  connections_table(o, r);
  const auto& notices = s.notices();
  if (!notices.empty()) {
    put(o, "<h3>Notices ({})</h3>\n<table class=\"notices\">", notices.size());
    for (size_t i = 0; i < notices.size() && i < 20; ++i)
      put(o, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", notice_level_name(notices[i].level),
          notices[i].frame ? fmt::format("frame {}", notices[i].frame) : std::string("-"),
          esc(notices[i].message));
    o += "</table>\n";
  }
  put(o, "<details><summary>The text report</summary><pre>{}</pre></details>\n</section>\n",
      esc(text_report(r, agg.roots)));
}

// The HTML report's part for one capture: the aggregates while it is read, its section once it
// is analysed (into the deferred stream: the page opens with the summary of all captures).
class HtmlCaptureReport final : public CaptureReport {
public:
  HtmlCaptureReport(ElementStream& section, size_t per_kind, const ReportOptions& ro, Sink& notices)
      : section_(section), ro_(ro), first_pass_(agg_, per_kind, notices) {}
  void first_segment(int64_t time_ns) override { first_pass_.first_time(time_ns); }
  void command(const CommandResult& c) override { first_pass_.command(c); }
  void finding(const Finding& f) override { first_pass_.finding(f); }
  void analysed(const CaptureResult& r) override {
    first_pass_.finish_lba();
    Out o;
    capture_section(r, agg_, ro_, o);
    std::fwrite(o.data(), 1, o.size(), section_.out);
    section_.empty = false;
  }

private:
  ElementStream& section_;
  const ReportOptions& ro_;
  Aggregates agg_;
  Aggregator first_pass_;
};

class HtmlReport final : public Report {
public:
  bool reads_twice() const override { return true; }
  explicit HtmlReport(const ReportOptions& o) : opt_(o) {}
  bool writes_deferred() const override { return true; }

  std::unique_ptr<CaptureReport> capture_report(size_t, CaptureStreams streams, Sink& notices) override {
    // Up to 3 ladders per finding kind, 1 with more than 4 captures: the page stays readable.
    const size_t per_kind = opt_.paths.size() <= 4 ? 3 : 1;
    return std::make_unique<HtmlCaptureReport>(*streams.deferred, per_kind, opt_, notices);
  }

  void end(FILE* out, const Overall& all, FILE* sections) override {
    const Summary none;
    const Summary& overall = all.summary ? *all.summary : none;
    Out h;
    put(h,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta "
        "charset=\"utf-8\"/>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
        "<title>iscsi-doctor report</title><style>{}</style></head>\n<body>\n",
        kCss);
    put(h,
        "<header><h1>iscsi-doctor report</h1><p>{} capture{}, {} usable, {} packets, {} SCSI commands, {} "
        "completed, "
        "{} excess round trips · iscsi-doctor {}</p></header>\n<main>\n",
        all.captures, all.captures == 1 ? "" : "s", all.usable, count_text(all.packets),
        count_text(overall.commands()), count_text(overall.completed()),
        count_text(overall.excess_round_trips()), ISCSI_DOCTOR_VERSION);
    const GateResult& gate = all.gate;
    if (gate.requested)
      put(h, "<p class=\"{}\" id=\"gate\">{}</p>\n",
          gate.unevaluable || gate.tripped ? "gate-bad" : "gate-ok", esc(gate_words(gate)));
    if (opt_.several) {
      std::string nav;
      for (size_t i = 0; i < opt_.paths.size(); ++i)
        nav += fmt::format("<a href=\"#c{}\">{}</a> ", i, esc(opt_.paths[i]));
      put(h, "<nav>{}</nav>\n<section class=\"all\" id=\"all\"><h2>All {} captures</h2>\n", nav,
          all.captures);
      advice_table(h, overall, false, "all", {});
      classes_table(h, overall);
      h += "</section>\n";
    }
    std::fwrite(h.data(), 1, h.size(), out);
    if (sections) copy_file(sections, out);
    std::fputs("</main>\n</body>\n</html>\n", out);
  }

private:
  ReportOptions opt_;
};

}  // namespace

std::unique_ptr<Report> make_html_report(const ReportOptions& o) { return std::make_unique<HtmlReport>(o); }

}  // namespace iscsi_doctor::cli
