// Approvals: the queue of tool calls that durable runs wait on
// (docs/approvals.md). Operators and admins approve or reject each call,
// with an optional comment; other roles see the queue read-only. New
// requests, decisions and ended runs (whose approvals close) arrive through
// the event stream and the queue is read again; a decision that lost a race
// (someone else decided, the run ended) shows the API's error text and the
// queue is read again too.
import * as api from "./api.js";
import { h, replace, showError, fmtTime, notify } from "./ui.js";

export function render(main, { principal }) {
  const canDecide = principal && (principal.role === "admin" || principal.role === "operator");
  const streamState = h("span", { class: "stream-state", role: "status", "aria-live": "polite" }, "connecting…");
  const refresh = h("button", { type: "button", class: "quiet", id: "approvals-refresh" }, "Refresh");
  const list = h("ul", { class: "approvals", id: "approvals", "aria-busy": "true", "aria-labelledby": "approvals-title" });
  main.append(h("div", { class: "toolbar" }, h("h1", { id: "approvals-title" }, "Approvals"), streamState, refresh));
  if (!canDecide) {
    main.append(h("p", { class: "hint", id: "approvals-readonly" }, `Deciding needs the operator or admin role; you are signed in as ${principal?.role || "?"}.`));
  }
  main.append(list);

  // Comments typed but not sent survive a redraw of the queue.
  const drafts = new Map();
  let loading = null;

  async function load() {
    if (loading) return loading;
    loading = (async () => {
      try {
        const pending = [];
        let cursor = "";
        do {
          const page = await api.get(`/approvals?status=pending&limit=200${cursor ? "&cursor=" + encodeURIComponent(cursor) : ""}`);
          pending.push(...page.approvals);
          cursor = page.next_cursor || "";
        } while (cursor);
        draw(pending.sort((a, b) => a.id - b.id));
        list.setAttribute("aria-busy", "false");
        list.dataset.ready = "true";
      } catch (err) {
        showError(err, "Loading the approvals");
      } finally {
        loading = null;
      }
    })();
    return loading;
  }

  function draw(pending) {
    if (!pending.length) {
      replace(list, h("li", { class: "muted empty" }, "Nothing waits for a decision."));
      return;
    }
    replace(list, ...pending.map(item));
  }

  function item(a) {
    const cid = `approval-comment-${a.id}`;
    const comment = h("textarea", { id: cid, rows: "2", disabled: !canDecide });
    comment.value = drafts.get(a.id) || "";
    comment.addEventListener("input", () => drafts.set(a.id, comment.value));
    const approve = h("button", { type: "button", dataset: { decision: "approve" }, disabled: !canDecide,
      "aria-label": `Approve ${a.tool} for ${a.agent_id}${a.task_id ? `, task #${a.task_id}` : ""}` }, "Approve");
    const reject = h("button", { type: "button", class: "danger", dataset: { decision: "reject" }, disabled: !canDecide,
      "aria-label": `Reject ${a.tool} for ${a.agent_id}${a.task_id ? `, task #${a.task_id}` : ""}` }, "Reject");
    const el = h("li", { class: "approval", dataset: { approvalId: a.id, status: a.status }, "aria-labelledby": `approval-title-${a.id}` },
      h("h2", { id: `approval-title-${a.id}` }, h("code", {}, a.tool), " ",
        h("span", { class: "muted" }, `asked by ${a.agent_id}${a.task_id ? ` · task #${a.task_id}, run ${a.attempt || ""}` : ""}`)),
      h("p", { class: "muted" }, "Requested ", h("time", { datetime: a.requested_at }, fmtTime(a.requested_at)),
        " · expires ", h("time", { datetime: a.expires_at }, fmtTime(a.expires_at)), " · workflow ", h("code", {}, a.workflow_id)),
      h("details", { open: true }, h("summary", {}, "Arguments"), h("pre", { class: "args" }, JSON.stringify(a.arguments ?? {}, null, 2))),
      h("label", { for: cid }, "Comment (goes with the decision; the model sees it on a rejection)"), comment,
      h("div", { class: "form-actions" }, reject, approve));
    for (const b of [approve, reject]) {
      b.addEventListener("click", () => decide(a, b.dataset.decision, comment, el));
    }
    return el;
  }

  async function decide(a, decision, comment, el) {
    const buttons = el.querySelectorAll("button[data-decision]");
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const done = await api.post(`/approvals/${a.id}`, { decision, comment: comment.value });
      drafts.delete(a.id);
      el.remove();
      notify(`${done.status === "approved" ? "Approved" : "Rejected"} the call to ${a.tool}${a.task_id ? ` (task #${a.task_id})` : ""}.`);
      if (!list.querySelector(".approval")) draw([]);
    } catch (err) {
      // 409: decided by someone else or the run no longer waits; the
      // envelope's text says which.
      showError(err, `Deciding ${a.tool}`);
      if (err.status === 409 || err.status === 404) { drafts.delete(a.id); load(); } else buttons.forEach((b) => { b.disabled = false; });
    }
  }

  refresh.addEventListener("click", load);

  // A request adds to the queue; a decision (here or elsewhere) or a run
  // that ended (cancelled, failed: its approvals are cancelled) takes items
  // out. The list is read once the stream is open, so nothing falls
  // between the two.
  let timer = null;
  const stream = new api.EventStream("type=run.approval_,run.cancelled,run.failed", {
    onState(s) {
      streamState.textContent = { open: "live", reconnecting: "reconnecting…", closed: "stream closed" }[s] || s;
      streamState.dataset.state = s;
      if (s === "open") load();
    },
    onGap: () => load(),
    onEvent() {
      clearTimeout(timer);
      timer = setTimeout(load, 100);
    },
  });

  return () => { clearTimeout(timer); stream.stop(); };
}
