// Agents and schedules: every agent with its model and state, enable or
// disable it, and for scheduled agents the next firing times and the last
// outcome.
import * as api from "./api.js";
import { h, replace, showError, fmtTime, notify } from "./ui.js";

export function render(main) {
  const list = h("div", { class: "table-wrap", id: "agents", "aria-busy": "true" });
  main.append(h("h1", {}, "Agents and schedules"), list);

  async function load() {
    try {
      const { agents } = await api.get("/agents");
      const [details, schedules] = await Promise.all([
        Promise.all(agents.map((a) => api.get(`/agents/${encodeURIComponent(a.id)}`).catch(() => a))),
        api.get("/schedules").then((r) => r.schedules).catch(() => []),
      ]);
      const byAgent = new Map(schedules.map((sc) => [sc.agent_id, sc]));
      replace(list, h("table", {},
        h("thead", {}, h("tr", {}, ["Agent", "Model", "State", "Trigger", "Next firings", "Last outcome", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, details.map((a) => row(a, byAgent.get(a.id))))));
      list.setAttribute("aria-busy", "false");
    } catch (err) { showError(err, "Agents"); }
  }

  function row(a, sc) {
    const enabled = a.enabled !== false;
    const toggle = h("button", { type: "button", class: enabled ? "quiet" : "", dataset: { agent: a.id } }, enabled ? "Disable" : "Enable");
    toggle.addEventListener("click", async () => {
      try {
        await api.post(`/agents/${encodeURIComponent(a.id)}/${enabled ? "disable" : "enable"}`);
        notify(`Agent ${a.id} ${enabled ? "disabled" : "enabled"}.`);
        load();
      } catch (err) { showError(err, `Agent ${a.id}`); }
    });
    const last = sc?.last_outcome;
    return h("tr", { dataset: { agent: a.id } },
      h("th", { scope: "row" }, a.id, a.description ? h("div", { class: "muted" }, a.description) : null),
      h("td", {}, `${a.llm?.provider || ""}/${a.llm?.model || ""}`),
      h("td", {}, enabled ? "enabled" : h("span", { class: "status-failed" }, "disabled")),
      h("td", {}, a.trigger || "—", sc ? h("div", { class: "muted" }, `${sc.cron} ${sc.timezone || ""}${sc.paused ? " (paused)" : ""}`) : null),
      h("td", {}, sc ? h("ul", { class: "plain" }, (sc.next_fire_times || []).slice(0, 3).map((t) => h("li", {}, fmtTime(t)))) : "—"),
      h("td", {}, last ? [h("span", { class: "status-" + last.status }, last.status), " ", fmtTime(last.at), last.error ? h("div", { class: "error" }, last.error) : null] : "—"),
      h("td", {}, toggle));
  }

  load();
}
