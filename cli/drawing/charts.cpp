// SPDX-License-Identifier: GPL-2.0-or-later
#include "drawing/charts.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "reports/formatting.hpp"

namespace iscsi_doctor::cli::html {
namespace {

using svg::esc;
using svg::num;

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

}  // namespace

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

}  // namespace iscsi_doctor::cli::html
