// The task panel: details, runs, the live timeline of the task's events,
// artifacts, comments and review. Its timeline replays the task's events
// from the start (last_event_id=0) and then follows new ones.
import * as api from "./api.js";
import { h, replace, showError, fmtTime, fmtDate, statusLabel, usd, notify } from "./ui.js";
import { taskDialog } from "./taskform.js";

const WB = "/workboard";
let temporalUI; // promise of the Web UI base URL and namespace, or null

// temporalLink finds where the Temporal Web UI is, from the configuration
// (admins only: others see the workflow id without a link).
export function temporalBase() {
  temporalUI ??= api.get("/config").then(({ config }) => {
    const t = config.temporal || {};
    const ns = t.namespace || "default";
    if (t.ui_url) return { base: t.ui_url.replace(/\/$/, ""), ns };
    const e = t.embedded || {};
    if (!t.address && e.ui_enabled && e.ui_port) {
      const host = !e.host || e.host === "0.0.0.0" ? location.hostname : e.host;
      return { base: `${location.protocol === "https:" ? "https" : "http"}://${host}:${e.ui_port}`, ns };
    }
    return null;
  }).catch(() => null);
  return temporalUI;
}

function describe(ev) {
  const p = ev.payload || {};
  switch (ev.type) {
    case "task.created": return ["Task created", ""];
    case "task.updated": return [`Task changed: ${(p.changed || []).join(", ")}`, ""];
    case "run.started": return [`Run ${ev.attempt ?? ""} started (${p.trigger || "api"})`, ""];
    case "run.approval_requested": return [`Waiting for approval to run ${p.tool} (approval #${p.approval_id}, expires ${fmtTime(p.expires_at)})`, "wait"];
    case "run.approval_decided": return [`Call to ${p.tool} ${p.status}${p.decided_by ? ` by ${p.decided_by}` : ""}${p.comment ? `: ${p.comment}` : ""}`,
      p.status === "approved" ? "ok" : "bad"];
    case "run.waiting": return [`Waiting for ${p.waiting_for}${p.reason ? `: ${p.reason}` : ""}`, "wait"];
    case "run.resumed": return [`Resumed after waiting for ${p.waiting_for}${p.waited_ms !== undefined ? ` (${Math.round(p.waited_ms / 1000)} s)` : ""}`, ""];
    case "run.turn": return [`Turn ${p.turn}: ${p.input_tokens}+${p.output_tokens} tokens${(p.tool_calls || []).length ? `, asked for ${p.tool_calls.join(", ")}` : ", answered"}`, ""];
    case "run.tool": return [`Tool ${p.tool} ${p.is_error ? "failed" : "ran"}${p.kind === "mcp" ? ` on MCP server ${p.server}` : p.kind === "skill" ? ` from skill ${p.skill}` : ""} (${p.duration_ms ?? "?"} ms)`,
      p.is_error ? "bad" : ""];
    case "run.artifact": return [`Artifact ${p.name || p.path} (${p.size_bytes ?? "?"} bytes) written by ${p.tool || "a tool"}`, ""];
    case "run.finished": return [`Run ${ev.attempt ?? ""} finished: ${p.turns} turn(s), ${p.input_tokens}+${p.output_tokens} tokens, ${p.duration_ms} ms`, "ok"];
    case "run.failed": return [`Run ${ev.attempt ?? ""} failed${p.timed_out ? " (time limit)" : ""}: ${p.error || ""}`, "bad"];
    case "run.cancelled": return [`Run ${ev.attempt ?? ""} cancelled: ${p.error || ""}`, "bad"];
    case "comment.created": return [`${p.kind === "review" ? "Review" : "Comment"} by ${p.author}${p.decision ? ` (${p.decision})` : ""}`, ""];
    case "comment.deleted": return ["Comment deleted", ""];
    default: return [ev.type, ""];
  }
}

// soon runs fn once after a burst of events (a replay brings many at once).
const pending = new Map();
function soon(fn) {
  if (pending.has(fn)) return;
  pending.set(fn, setTimeout(() => { pending.delete(fn); fn(); }, 100));
}

export function openPanel(id, { agents, statuses, onChange, onDelete, onClose }) {
  let task = null;
  const closeBtn = h("button", { type: "button", class: "quiet", "aria-label": "Close task panel" }, "Close");
  const heading = h("h2", { id: "panel-title" }, `Task #${id}`);
  const details = h("div", { id: "panel-details" });
  const actions = h("div", { class: "toolbar" });
  const runsEl = h("div", { id: "panel-runs" });
  const timeline = h("ol", { class: "timeline", id: "timeline", "aria-live": "polite" });
  const artifactsEl = h("ul", { class: "plain", id: "artifacts" });
  const commentsEl = h("ul", { class: "comments", id: "comments" });
  const reviewEl = h("div", { id: "review" });
  const commentBox = h("textarea", { id: "comment-body", rows: "2" });
  const commentForm = h("form", {},
    h("label", { for: "comment-body" }, "Add a comment"), commentBox,
    h("div", { class: "form-actions" }, h("button", { type: "submit" }, "Comment")));
  const panel = h("aside", { class: "panel", id: "task-panel", "aria-labelledby": "panel-title", tabindex: "-1" },
    h("header", {}, heading, closeBtn),
    details, actions,
    h("h3", {}, "Runs"), runsEl,
    h("h3", {}, "Timeline"), timeline,
    h("h3", {}, "Artifacts"), artifactsEl,
    h("h3", {}, "Comments"), commentsEl, reviewEl, commentForm);
  document.body.append(panel);
  panel.focus();

  const path = `${WB}/tasks/${id}`;
  async function loadTask() {
    try {
      task = await api.get(path);
      drawTask();
    } catch (err) { showError(err, `Task #${id}`); }
  }
  function drawTask() {
    heading.textContent = task.title;
    replace(details, 
      h("p", {}, h("span", { class: "status-" + task.status, id: "panel-status" }, statusLabel(task.status)),
        " · priority ", task.priority, task.agent_id ? ` · agent ${task.agent_id}` : " · no agent",
        task.owner ? ` · owner ${task.owner}` : "", task.due_at ? ` · due ${fmtDate(task.due_at)}` : ""),
      task.description ? h("p", {}, task.description) : null,
      (task.tags || []).length ? h("p", {}, task.tags.map((t) => h("span", { class: "chip" }, t, " "))) : null);
    const run = h("button", { type: "button", id: "run-task", disabled: !task.agent_id || task.status === "running" }, "Run");
    run.addEventListener("click", startRun);
    const edit = h("button", { type: "button", class: "quiet", id: "edit-task" }, "Edit");
    edit.addEventListener("click", () => taskDialog({ task, agents: agents(), statuses: statuses() }, async (fields) => {
      task = await api.patch(path, fields);
      drawTask();
      onChange(task);
    }));
    const del = h("button", { type: "button", class: "danger" }, "Delete");
    del.addEventListener("click", async () => {
      if (!confirm(`Delete task “${task.title}” with its runs, artifacts and comments?`)) return;
      try { await api.request("DELETE", path); onDelete(id); close(); } catch (err) { showError(err, "Delete"); }
    });
    replace(actions, run, edit, del);
    replace(reviewEl);
    if (task.status === "needs_review") {
      const accept = h("button", { type: "button", id: "review-accept" }, "Accept");
      const back = h("button", { type: "button", class: "quiet", id: "review-reject" }, "Send back");
      accept.addEventListener("click", () => review("accept"));
      back.addEventListener("click", () => review("reject"));
      reviewEl.append(h("p", {}, "This task awaits review. The comment below goes with the decision."), h("div", { class: "toolbar" }, accept, back));
    }
  }

  async function startRun() {
    try {
      const run = await api.post(`${path}/run`);
      notify(`Run ${run.attempt} queued (workflow ${run.workflow_id}).`);
      loadRuns();
    } catch (err) { showError(err, "Run"); }
  }

  async function review(decision) {
    try {
      const c = await api.post(`${path}/comments`, { kind: "review", decision, body: commentBox.value || (decision === "accept" ? "Accepted." : "Sent back.") });
      commentBox.value = "";
      task = { ...task, status: c.task_status };
      drawTask();
      onChange(task);
      loadComments();
    } catch (err) { showError(err, "Review"); }
  }

  async function loadRuns() {
    try {
      const [{ runs, count }, ui] = await Promise.all([api.get(`${path}/runs?limit=5`), temporalBase()]);
      replace(runsEl, count === 0 ? h("p", { class: "muted" }, "No runs yet.") :
        h("ul", { class: "plain" }, runs.map((r) => h("li", { dataset: { runId: r.id, status: r.status } },
          h("strong", {}, `#${r.attempt}`), h("span", { class: "status-" + r.status }, r.status === "waiting" && r.waiting_for ? `waiting for ${r.waiting_for}` : r.status),
          r.status === "waiting" && r.waiting_for === "approval" ? h("a", { href: "#/approvals" }, "Decide in Approvals") : null,
          h("span", { class: "muted" }, fmtTime(r.created_at)),
          r.turns ? h("span", {}, `${r.turns} turns`) : null,
          r.cost_usd ? h("span", {}, usd(r.cost_usd)) : null,
          r.children && r.children.length ? h("span", { title: "the run and every peer run it delegated to (docs/teams.md)" }, `tree ${usd(r.tree_cost_usd || 0)}`) : null,
          ui ? h("a", { href: `${ui.base}/namespaces/${encodeURIComponent(ui.ns)}/workflows/${encodeURIComponent(r.workflow_id)}/${encodeURIComponent(r.temporal_run_id || "")}`,
            target: "_blank", rel: "noopener noreferrer" }, `${r.workflow_id} in Temporal`)
            : h("code", { title: "Temporal workflow id" }, r.workflow_id),
          r.error ? h("span", { class: "error" }, r.error) : null,
          r.children && r.children.length ? runTree(r.children) : null))));
    } catch (err) { showError(err, "Runs"); }
  }

  // runTree lists a run's peer runs (delegations, docs/teams.md),
  // indented by depth, in the order they started.
  function runTree(children) {
    return h("ul", { class: "plain run-tree", "aria-label": "Delegations" }, children.map((c) =>
      h("li", { dataset: { peerRunId: c.id, status: c.status }, style: `margin-left: ${(c.depth || 1) * 1.2}em` },
        h("span", {}, "\u21b3 "), h("strong", {}, c.agent_id), h("span", { class: "status-" + c.status }, c.status),
        c.turns ? h("span", {}, `${c.turns} turns`) : null,
        h("span", {}, usd(c.cost_usd || 0)),
        h("code", { title: "Temporal workflow id" }, c.workflow_id),
        c.error ? h("span", { class: "error" }, c.error) : null)));
  }

  async function loadArtifacts() {
    try {
      const { artifacts } = await api.get(`${path}/artifacts?limit=500`);
      replace(artifactsEl, ...(artifacts.length ? artifacts.map((a) => {
        const b = h("button", { type: "button", class: "quiet", dataset: { artifactId: a.id } }, "Download");
        const name = a.name || a.path.split("/").pop();
        b.addEventListener("click", () => api.download(`${WB}/artifacts/${a.id}/download`, name).catch((err) => showError(err, "Download")));
        return h("li", {}, h("span", {}, name), h("span", { class: "muted" }, `${a.size_bytes} bytes`), b);
      }) : [h("li", { class: "muted" }, "None.")]));
    } catch (err) { showError(err, "Artifacts"); }
  }

  async function loadComments() {
    try {
      const { comments } = await api.get(`${path}/comments?limit=500`);
      replace(commentsEl, ...comments.map((c) => h("li", {},
        h("strong", {}, c.author || "anonymous"), " ", h("span", { class: "muted" }, fmtTime(c.created_at)),
        c.decision ? h("span", { class: "chip" }, c.decision === "accept" ? "accepted" : "sent back") : null,
        h("div", {}, c.body))));
    } catch (err) { showError(err, "Comments"); }
  }

  commentForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!commentBox.value.trim()) return;
    try {
      await api.post(`${path}/comments`, { body: commentBox.value });
      commentBox.value = "";
      loadComments();
    } catch (err) { showError(err, "Comment"); }
  });

  const stream = new api.EventStream(`task_id=${id}`, {
    lastEventId: "0",
    onEvent(ev) {
      const [text, cls] = describe(ev);
      timeline.append(h("li", { class: cls, dataset: { type: ev.type, id: ev.id } }, h("time", { datetime: ev.created_at }, fmtTime(ev.created_at)), text));
      if (ev.type.startsWith("run.")) {
        soon(loadRuns);
        if (ev.type !== "run.started") soon(loadArtifacts);
        if (ev.payload?.task_status && task) { task = { ...task, status: ev.payload.task_status }; drawTask(); }
      } else if (ev.type.startsWith("comment.")) soon(loadComments);
      else if (ev.type === "task.updated" && ev.payload?.task) { task = ev.payload.task; drawTask(); }
    },
  });

  function close() {
    stream.stop();
    panel.remove();
    onClose();
  }
  closeBtn.addEventListener("click", close);
  panel.addEventListener("keydown", (e) => { if (e.key === "Escape" && !document.querySelector("dialog[open]")) close(); });

  loadTask(); loadRuns(); loadArtifacts(); loadComments();
  return { close };
}
