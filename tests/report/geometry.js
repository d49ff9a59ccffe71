// SPDX-License-Identifier: GPL-2.0-or-later
// Injected by test_report.py into a copy of an HTML report: on load, opens every <details> (folded
// ladders have no layout otherwise), measures the page's elements as Chromium lays them out and
// writes the figures as JSON into a pre element (id geom), which `chromium --dump-dom` then prints.
window.addEventListener("load", () => {
  for (const d of document.querySelectorAll("details")) d.open = true;
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const overlap = (a, b) => Math.min(a[2] - b[0], b[2] - a[0]) > 1 && Math.min(a[3] - b[1], b[3] - a[1]) > 1;
  const out = {ladders: [], tables: [], charts: [], legend_gaps: []};
  for (const svg of document.querySelectorAll("svg.ladder")) {
    const texts = [...svg.querySelectorAll("text")]
      .map((t) => ({t: t.textContent, b: box(t)}))
      .filter((x) => x.b[2] > x.b[0] && x.t.trim() !== "");
    texts.sort((x, y) => x.b[1] - y.b[1]);
    const pairs = [];
    for (let i = 0; i < texts.length; ++i)
      for (let j = i + 1; j < texts.length && texts[j].b[1] < texts[i].b[3] - 1; ++j)
        if (overlap(texts[i].b, texts[j].b)) pairs.push([texts[i].t, texts[j].t]);
    const used = new Set();
    for (const el of svg.querySelectorAll("[data-role]")) used.add(el.getAttribute("data-role"));
    const named = new Set([...svg.querySelectorAll("[data-legend]")].map((e) => e.getAttribute("data-legend")));
    out.ladders.push({
      id: svg.id,
      height: svg.getBoundingClientRect().height,
      texts: texts.length,
      overlaps: pairs,
      roles: [...used],
      legend: [...named],
    });
  }
  for (const t of document.querySelectorAll("table")) {
    const c = t.parentElement;
    const cs = getComputedStyle(c);
    const inner = c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    out.tables.push({cls: t.className, width: t.getBoundingClientRect().width, scroll: t.scrollWidth, room: inner});
  }
  for (const svg of document.querySelectorAll("svg.latency-chart, svg.timeline-chart, svg.gap-chart, svg.lba-chart")) {
    const ticks = (cls) => [...svg.querySelectorAll("text." + cls)].map((t) => t.textContent);
    out.charts.push({id: svg.id, cls: svg.getAttribute("class"), xticks: ticks("xtick"), yticks: ticks("ytick")});
  }
  const pre = document.createElement("pre");
  pre.id = "geom";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
