// Memory: what an agent with memory remembers of your subject's users
// (GET /memory/entries; docs/memory.md), filtered by user and kind, and
// forgetting one (DELETE /memory/entries/{id}).
import * as api from "./api.js";
import { h, replace, showError, fmtTime, notify } from "./ui.js";

export function render(main) {
  const agentSel = h("select", { id: "memory-agent" });
  const user = h("input", { id: "memory-user", type: "text", class: "narrow", placeholder: "every user", "aria-label": "User" });
  const kind = h("select", { id: "memory-kind" }, h("option", { value: "" }, "facts and archive"),
    h("option", { value: "fact" }, "facts"), h("option", { value: "archive" }, "archive"));
  const list = h("div", { class: "table-wrap", id: "memories", "aria-busy": "true" });
  main.append(h("div", { class: "toolbar" }, h("h1", {}, "Memory"),
    h("label", { for: "memory-agent" }, "Agent"), agentSel,
    h("label", { for: "memory-user" }, "User"), user,
    h("label", { for: "memory-kind" }, "Kind"), kind), list);

  async function load() {
    const agentID = agentSel.value;
    if (!agentID) { replace(list, h("p", { class: "muted" }, "No agents.")); return; }
    const q = new URLSearchParams({ agent_id: agentID });
    if (user.value.trim()) q.set("user_id", user.value.trim());
    if (kind.value) q.set("kind", kind.value);
    list.setAttribute("aria-busy", "true");
    try {
      const { memories } = await api.get(`/memory/entries?${q}`);
      if (!memories.length) {
        replace(list, h("p", { class: "muted", id: "memory-empty" }, `No memories of ${agentID}.`));
      } else {
        replace(list, h("table", {},
          h("thead", {}, h("tr", {}, ["Kind", "User", "Used", "Text", ""].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, memories.map(row))));
      }
      list.setAttribute("aria-busy", "false");
    } catch (err) { showError(err, "Memory"); }
  }

  function row(m) {
    const forget = h("button", { type: "button", class: "quiet", dataset: { memory: String(m.id) } }, "Forget");
    forget.addEventListener("click", async () => {
      try {
        await api.request("DELETE", `/memory/entries/${m.id}`);
        notify(`Memory ${m.id} forgotten.`);
        load();
      } catch (err) { showError(err, `Memory ${m.id}`); }
    });
    return h("tr", { dataset: { memory: String(m.id) } },
      h("td", {}, m.kind), h("td", {}, m.user_id || "—"), h("td", {}, fmtTime(m.used_at)),
      h("td", { class: "memory-text" }, m.text), h("td", {}, forget));
  }

  api.get("/agents").then(({ agents }) => {
    replace(agentSel, ...agents.map((a) => h("option", { value: a.id }, a.id)));
    load();
  }).catch((err) => showError(err, "Agents"));
  for (const el of [agentSel, kind]) el.addEventListener("change", load);
  user.addEventListener("change", load);
}
