// Knowledge bases: every base with its status, its documents (failed ones
// with the reason), re-index, and a search box showing passages with their
// citations.
import * as api from "./api.js";
import { h, replace, showError, fmtTime, notify } from "./ui.js";

export function render(main) {
  const list = h("div", { class: "table-wrap", id: "knowledge-bases", "aria-busy": "true" });
  const docs = h("section", { id: "knowledge-documents", "aria-live": "polite" });
  const base = h("select", { id: "knowledge-base", "aria-label": "Knowledge base" });
  const query = h("input", { id: "knowledge-query", type: "search", placeholder: "Search the knowledge base", required: true, maxlength: "2000" });
  const results = h("ol", { id: "knowledge-results", class: "plain", "aria-live": "polite" });
  const form = h("form", { id: "knowledge-search", class: "row" },
    h("label", { for: "knowledge-query" }, "Search"), base, query, h("button", { type: "submit" }, "Search"));
  main.append(h("h1", {}, "Knowledge bases"), list, form, results, docs);

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!base.value) { return; }
    try {
      const r = await api.post(`/knowledge/bases/${encodeURIComponent(base.value)}/search`, { query: query.value });
      replace(results, r.passages.length === 0 ? h("li", { class: "muted" }, "No passage matches.") :
        r.passages.map((p) => h("li", {},
          h("div", { class: "muted" }, `${p.source}#${p.position} · score ${p.score.toFixed(3)}`),
          h("p", {}, p.text))));
    } catch (err) { showError(err, "Search"); }
  });

  async function showDocuments(id) {
    try {
      const { documents } = await api.get(`/knowledge/bases/${encodeURIComponent(id)}/documents`);
      replace(docs, h("h2", {}, `Documents of ${id}`), h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Source", "Status", "Chunks", "Indexed"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, documents.map((d) => h("tr", {},
          h("th", { scope: "row" }, d.source),
          h("td", {}, h("span", { class: "status-" + d.status }, d.status + (d.waiting_for ? ` (waiting for ${d.waiting_for})` : "")),
            d.error ? h("div", { class: "error" }, d.error) : null),
          h("td", {}, d.status === "indexing" ? `${d.embedded} / ${d.chunks}` : String(d.chunks)),
          h("td", {}, d.indexed_at ? fmtTime(d.indexed_at) : "—")))))));
    } catch (err) { showError(err, `Documents of ${id}`); }
  }

  async function load() {
    try {
      const { bases } = await api.get("/knowledge/bases");
      replace(base, bases.map((b) => h("option", { value: b.id }, b.id)));
      replace(list, bases.length === 0 ? h("p", { class: "muted" }, "No knowledge bases: add knowledge.bases to config.yaml.") : h("table", {},
        h("thead", {}, h("tr", {}, ["Base", "Status", "Documents", "Ready", "Failed", "Chunks", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, bases.map(row))));
      list.setAttribute("aria-busy", "false");
    } catch (err) { showError(err, "Knowledge bases"); }
  }

  function row(b) {
    const open = h("button", { type: "button", class: "quiet" }, "Documents");
    open.addEventListener("click", () => showDocuments(b.id));
    const reindex = h("button", { type: "button", class: "quiet" }, "Re-index");
    reindex.addEventListener("click", async () => {
      try {
        const r = await api.post(`/knowledge/bases/${encodeURIComponent(b.id)}/reindex`);
        notify(`Re-indexing ${b.id}: ${r.started} documents checked.`);
        load();
      } catch (err) { showError(err, `Re-index ${b.id}`); }
    });
    return h("tr", { dataset: { base: b.id } },
      h("th", { scope: "row" }, b.id, b.description ? h("div", { class: "muted" }, b.description) : null),
      h("td", {}, h("span", { class: "status-" + b.status }, b.status)),
      h("td", {}, String(b.documents)), h("td", {}, String(b.ready)), h("td", {}, String(b.failed)), h("td", {}, String(b.chunks)),
      h("td", {}, open, " ", reindex));
  }

  load();
  const timer = setInterval(load, 5000);
  return () => clearInterval(timer);
}
