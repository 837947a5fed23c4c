// Board: the workboard's tasks in columns of the API's `statuses` order,
// kept current by the event stream. Cards move by dragging (pointer
// events: mouse, pen or touch), with the status menu on each card, or with
// Alt+ArrowLeft / Alt+ArrowRight on a focused card. A card whose run is
// parked (run status waiting) wears a badge naming what it waits for: a
// person's approval or the budget.
import * as api from "./api.js";
import { h, replace, showError, fmtDate, statusLabel, notify } from "./ui.js";
import { openPanel } from "./taskpanel.js";
import { taskDialog } from "./taskform.js";

const WB = "/workboard";

export function render(main) {
  // waiting: task id -> what its run waits for (approval, budget).
  const state = { tasks: new Map(), statuses: [], agents: [], panel: null, waiting: new Map() };
  const streamState = h("span", { class: "stream-state", role: "status", "aria-live": "polite" }, "connecting…");
  const boardEl = h("div", { class: "board", id: "board", "aria-busy": "true" });
  const newBtn = h("button", { type: "button", id: "new-task" }, "New task");
  main.append(h("div", { class: "toolbar" }, h("h1", {}, "Board"), streamState, newBtn), boardEl);

  let loaded = false;
  async function load() {
    try {
      const tasks = [];
      let cursor = "";
      let statuses = [];
      do {
        const page = await api.get(`${WB}/tasks?limit=500${cursor ? "&cursor=" + encodeURIComponent(cursor) : ""}`);
        tasks.push(...page.tasks);
        statuses = page.statuses;
        cursor = page.next_cursor || "";
      } while (cursor);
      state.statuses = statuses;
      state.tasks = new Map(tasks.map((t) => [t.id, t]));
      await loadWaiting(tasks);
      draw();
      boardEl.setAttribute("aria-busy", "false");
      boardEl.dataset.ready = "true";
      if (!loaded) {
        loaded = true;
        performance.mark("agentry-board-rendered");
      }
    } catch (err) {
      showError(err, "Loading the board");
    }
  }
  // loadWaiting finds the parked runs: pending approvals name their
  // tasks; a running task's latest run tells whether it waits for budget.
  async function loadWaiting(tasks) {
    const waiting = new Map();
    try {
      const { approvals } = await api.get("/approvals?status=pending&limit=500");
      for (const a of approvals) if (a.task_id) waiting.set(a.task_id, "approval");
      await Promise.all(tasks.filter((t) => t.status === "running" && !waiting.has(t.id)).map(async (t) => {
        const { runs } = await api.get(`${WB}/tasks/${t.id}/runs?limit=1`);
        if (runs[0]?.status === "waiting") waiting.set(t.id, runs[0].waiting_for || "approval");
      }));
    } catch { /* badges are a hint; the board works without them */ }
    state.waiting = waiting;
  }

  api.get("/agents").then((r) => { state.agents = r.agents; }).catch(() => {});

  // The stream is opened first and the list loaded once it is open, so no
  // change falls between the two. A reconnect resumes with Last-Event-ID;
  // only a reconnect with no id to resume from reloads the list.
  const stream = new api.EventStream("type=task.,run.", {
    onState(s) {
      streamState.textContent = { open: "live", reconnecting: "reconnecting…", closed: "stream closed" }[s] || s;
      streamState.dataset.state = s;
      if (s === "open" && !loaded) load();
    },
    onGap: () => load(),
    onEvent(ev) {
      const p = ev.payload || {};
      if (ev.type === "task.created" || ev.type === "task.updated") {
        if (p.task) state.tasks.set(p.task.id, p.task);
      } else if (ev.type === "task.deleted") {
        state.tasks.delete(ev.task_id);
      } else if (ev.type.startsWith("run.") && p.task_status && state.tasks.has(ev.task_id)) {
        state.tasks.set(ev.task_id, { ...state.tasks.get(ev.task_id), status: p.task_status });
      }
      if (ev.type === "run.approval_requested" || ev.type === "run.waiting") {
        state.waiting.set(ev.task_id, p.waiting_for || "approval");
      } else if (["run.approval_decided", "run.resumed", "run.finished", "run.failed", "run.cancelled"].includes(ev.type)) {
        state.waiting.delete(ev.task_id);
      }
      boardEl.dataset.lastEventId = ev.id;
      if (loaded) draw();
    },
  });

  newBtn.addEventListener("click", () => {
    taskDialog({ agents: state.agents, statuses: state.statuses }, async (fields) => {
      const t = await api.post(`${WB}/tasks`, fields);
      state.tasks.set(t.id, t);
      draw();
      notify(`Task “${t.title}” created.`);
    });
  });

  async function move(task, status) {
    if (!status || status === task.status) { draw(); return; }
    const before = task.status;
    state.tasks.set(task.id, { ...task, status });
    draw();
    try {
      const t = await api.patch(`${WB}/tasks/${task.id}`, { status });
      state.tasks.set(t.id, t);
    } catch (err) {
      state.tasks.set(task.id, { ...task, status: before });
      showError(err, `Moving “${task.title}”`);
    }
    draw();
    document.querySelector(`.card[data-id="${task.id}"]`)?.focus();
  }

  function openTask(id) {
    state.panel?.close();
    state.panel = openPanel(id, {
      agents: () => state.agents, statuses: () => state.statuses,
      onChange: (t) => { state.tasks.set(t.id, t); draw(); },
      onDelete: (id) => { state.tasks.delete(id); draw(); },
      onClose: () => { state.panel = null; },
    });
  }

  function draw() {
    boardEl.style.setProperty("--cols", String(state.statuses.length || 5));
    const cols = state.statuses.map((status) => {
      const tasks = [...state.tasks.values()].filter((t) => t.status === status).sort((a, b) => a.id - b.id);
      return h("section", { class: "column", dataset: { status }, "aria-labelledby": `col-${status}` },
        h("h2", { id: `col-${status}` }, statusLabel(status), h("span", { class: "muted" }, String(tasks.length))),
        h("ul", { class: "cards" }, tasks.map((t) => card(t))));
    });
    replace(boardEl, ...cols);
  }

  function card(t) {
    const sel = h("select", { "aria-label": `Status of ${t.title}`, class: "status-select" },
      state.statuses.map((s) => h("option", { value: s, selected: s === t.status }, statusLabel(s))));
    sel.addEventListener("change", () => move(t, sel.value));
    const waits = state.waiting.get(t.id);
    const el = h("li", { class: "card", tabindex: "0", dataset: { id: t.id, status: t.status },
      "aria-label": `${t.title}, ${statusLabel(t.status)}${waits ? `, waiting for ${waits}` : ""}. Alt+Arrow keys move it.` },
      h("button", { type: "button", class: "title", onclick: () => openTask(t.id) }, t.title),
      waits && (waits === "approval"
        ? h("a", { class: "badge waiting", href: "#/approvals", dataset: { waiting: waits } }, "waiting for approval")
        : h("span", { class: "badge waiting", dataset: { waiting: waits } }, `waiting for ${waits}`)),
      h("div", { class: "meta" },
        t.agent_id && h("span", {}, "agent ", h("strong", {}, t.agent_id)),
        t.owner && h("span", {}, "owner ", h("strong", {}, t.owner)),
        h("span", { class: "prio-" + t.priority, title: "priority" }, t.priority),
        t.due_at && h("span", { title: "due" }, "due ", fmtDate(t.due_at)),
        (t.tags || []).map((tag) => h("span", { class: "chip" }, tag))),
      sel);
    el.addEventListener("keydown", (e) => {
      if (e.target !== el) return;
      if (e.key === "Enter") { openTask(t.id); return; }
      if (!e.altKey || (e.key !== "ArrowLeft" && e.key !== "ArrowRight")) return;
      e.preventDefault();
      const i = state.statuses.indexOf(t.status) + (e.key === "ArrowRight" ? 1 : -1);
      if (i >= 0 && i < state.statuses.length) move(t, state.statuses[i]);
    });
    dragSource(el, t);
    return el;
  }

  // dragSource lets a card be dragged onto a column with any pointer.
  function dragSource(el, t) {
    el.addEventListener("pointerdown", (down) => {
      if (down.button !== 0 || down.target.closest("select, a, button:not(.title)")) return;
      let dragging = false;
      let target = null;
      const moveFn = (e) => {
        const dx = e.clientX - down.clientX, dy = e.clientY - down.clientY;
        if (!dragging && Math.hypot(dx, dy) < 6) return;
        if (!dragging) { dragging = true; el.classList.add("dragging"); el.setPointerCapture?.(down.pointerId); }
        el.style.transform = `translate(${dx}px, ${dy}px)`;
        el.style.pointerEvents = "none";
        const col = document.elementFromPoint(e.clientX, e.clientY)?.closest(".column");
        el.style.pointerEvents = "";
        if (col !== target) { target?.classList.remove("drop-target"); target = col; target?.classList.add("drop-target"); }
      };
      const up = () => {
        window.removeEventListener("pointermove", moveFn);
        window.removeEventListener("pointerup", up);
        window.removeEventListener("pointercancel", up);
        if (!dragging) return;
        el.classList.remove("dragging");
        el.style.transform = "";
        target?.classList.remove("drop-target");
        // A drag is not a click on the title.
        el.addEventListener("click", (e) => e.stopPropagation(), { capture: true, once: true });
        move(t, target?.dataset.status);
      };
      window.addEventListener("pointermove", moveFn);
      window.addEventListener("pointerup", up);
      window.addEventListener("pointercancel", up);
    });
  }

  return () => { stream.stop(); state.panel?.close(); };
}
