// Costs: today's and this month's spend against the budgets, money held by
// calls in flight, readiness problems, reconciliation variance, and the
// chargeback by user, feature, provider or model as a bar chart (inline
// SVG) and a table.
import * as api from "./api.js";
import { h, replace, s, showError, usd, fmtTime } from "./ui.js";

const DIMENSIONS = ["user", "feature", "provider", "model"];

export function render(main) {
  const statusEl = h("div", { id: "costs-status", "aria-busy": "true" });
  const tabs = h("div", { class: "tabs", role: "group", "aria-label": "Group chargeback by" });
  const chart = h("div", { id: "chargeback-chart" });
  const table = h("div", { class: "table-wrap", id: "chargeback-table" });
  main.append(h("h1", {}, "Costs"), statusEl,
    h("h2", {}, "Chargeback this month"), tabs, chart, table);
  let dim = "user";
  for (const d of DIMENSIONS) {
    const b = h("button", { type: "button", "aria-pressed": String(d === dim), dataset: { dim: d } }, "by " + d);
    b.addEventListener("click", () => {
      dim = d;
      for (const x of tabs.children) x.setAttribute("aria-pressed", String(x.dataset.dim === dim));
      loadChargeback();
    });
    tabs.append(b);
  }

  async function loadStatus() {
    try {
      const st = await api.get("/costs/status");
      replace(statusEl, 
        h("p", {}, "Readiness: ", h("strong", { class: st.status === "ready" ? "status-done" : "status-failed", id: "costs-readiness" }, st.status),
          " · enforcement ", st.enforcement_mode, " · as of ", fmtTime(st.generated_at)),
        (st.problems || []).length ? h("ul", { id: "costs-problems" }, st.problems.map((p) => h("li", { class: "error" }, typeof p === "string" ? p : JSON.stringify(p)))) : null,
        h("div", { class: "cards-row" },
          period("Today", st.periods?.day), period("This month", st.periods?.month),
          h("div", { class: "stat", id: "in-flight" }, h("div", { class: "muted" }, "In flight"),
            h("div", { class: "big" }, usd(st.in_flight?.reserved_usd)),
            h("div", {}, `${st.in_flight?.reservations ?? 0} reservation(s)`,
              st.in_flight?.oldest_expires_at ? ` · oldest expires ${fmtTime(st.in_flight.oldest_expires_at)}` : "")),
          h("div", { class: "stat" }, h("div", { class: "muted" }, "Month-end forecast"),
            h("div", { class: "big" }, usd(st.forecast?.month_end_spend_usd)),
            st.forecast?.exceeds_monthly_budget ? h("div", { class: "error" }, "exceeds the monthly budget") : null),
          reconciliation(st.reconciliation)));
      statusEl.setAttribute("aria-busy", "false");
    } catch (err) { showError(err, "Cost status"); }
  }

  function period(label, p) {
    if (!p) return null;
    const frac = p.budget_usd ? Math.min(1, (p.spend_usd + p.reserved_usd) / p.budget_usd) : 0;
    return h("div", { class: "stat" }, h("div", { class: "muted" }, label),
      h("div", { class: "big" }, usd(p.spend_usd)),
      h("div", {}, p.budget_usd ? `of ${usd(p.budget_usd)} budget · ${usd(p.remaining_usd)} left` : "no budget set", ` · ${p.calls ?? 0} call(s)`),
      p.budget_usd ? h("div", { class: "meter" + (p.alert ? " alert" : ""), role: "meter", "aria-valuemin": "0", "aria-valuemax": "100",
        "aria-valuenow": String(Math.round(frac * 100)), "aria-label": `${label}: ${Math.round(frac * 100)}% of budget used` },
      bar(frac)) : null);
  }

  // bar is the filled part of a meter (its width set through the CSSOM:
  // the console's CSP allows no inline style attributes).
  function bar(frac) {
    const el = h("span");
    el.style.width = `${(frac * 100).toFixed(1)}%`;
    return el;
  }

  function reconciliation(r) {
    if (!r || r.variance === null || r.variance === undefined) return null;
    return h("div", { class: "stat", id: "variance" }, h("div", { class: "muted" }, "Reconciliation variance"),
      h("div", { class: "big" }, typeof r.variance === "number" ? `${(r.variance * 100).toFixed(2)}%` : JSON.stringify(r.variance)),
      h("div", {}, r.status || ""));
  }

  async function loadChargeback() {
    try {
      const cb = await api.get(`/costs/chargeback?group_by=${dim}`);
      const groups = cb.groups || [];
      replace(chart, barChart(groups));
      replace(table, h("table", {},
        h("caption", { class: "muted" }, `${cb.from ? fmtTime(cb.from) : ""} – ${cb.to ? fmtTime(cb.to) : ""}`),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, dim), ...["calls", "input tokens", "output tokens", "cost"].map((c) => h("th", { scope: "col", class: "num" }, c)))),
        h("tbody", {}, groups.map((g) => h("tr", {}, h("td", {}, g[dim] || "(none)"), h("td", { class: "num" }, g.calls),
          h("td", { class: "num" }, g.input_tokens), h("td", { class: "num" }, g.output_tokens), h("td", { class: "num" }, usd(g.cost_usd))))),
        cb.totals ? h("tfoot", {}, h("tr", {}, h("th", { scope: "row" }, "total"), h("td", { class: "num" }, cb.totals.calls),
          h("td", { class: "num" }, cb.totals.input_tokens), h("td", { class: "num" }, cb.totals.output_tokens), h("td", { class: "num" }, usd(cb.totals.cost_usd)))) : null));
    } catch (err) { showError(err, "Chargeback"); }
  }

  // barChart draws cost per group as horizontal bars; the table beside it
  // carries the same numbers for screen readers.
  function barChart(groups) {
    if (!groups.length) return h("p", { class: "muted" }, "No spend recorded in this period.");
    const rowH = 26, labelW = 180, width = 640;
    const max = Math.max(...groups.map((g) => g.cost_usd), 1e-9);
    const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${groups.length * rowH + 8}`, width: "100%", role: "img",
      "aria-label": `Cost by ${dim}: ` + groups.map((g) => `${g[dim] || "(none)"} ${usd(g.cost_usd)}`).join(", ") });
    groups.forEach((g, i) => {
      const y = i * rowH + 4;
      const w = Math.max(2, (width - labelW - 90) * (g.cost_usd / max));
      svg.append(
        s("text", { x: labelW - 8, y: y + 16, "text-anchor": "end" }, String(g[dim] || "(none)").slice(0, 24)),
        s("rect", { class: "bar", x: labelW, y: y + 3, width: w.toFixed(1), height: rowH - 8, rx: 3 }),
        s("text", { x: labelW + w + 6, y: y + 16 }, usd(g.cost_usd)));
    });
    return svg;
  }

  loadStatus();
  loadChargeback();
  const timer = setInterval(loadStatus, 30000);
  return () => clearInterval(timer);
}
