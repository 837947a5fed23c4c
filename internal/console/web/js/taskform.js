// The create / edit task form, in a modal <dialog>. onSubmit gets the
// fields to send; an API error is shown inside the dialog, which stays
// open so nothing typed is lost.
import { h, statusLabel } from "./ui.js";

const PRIORITIES = ["low", "normal", "high", "urgent"];

export function taskDialog({ task = null, agents = [], statuses = [] }, onSubmit) {
  const t = task || { title: "", description: "", agent_id: "", owner: "", priority: "normal", tags: [], due_at: "", status: statuses[0] || "todo" };
  const field = (id, label, input) => [h("label", { for: id }, label), input];
  const title = h("input", { id: "tf-title", name: "title", required: true, maxlength: "500", value: t.title });
  const desc = h("textarea", { id: "tf-description", name: "description", rows: "3" });
  desc.value = t.description || "";
  const agentIds = agents.map((a) => a.id);
  if (t.agent_id && !agentIds.includes(t.agent_id)) agentIds.push(t.agent_id);
  const agent = h("select", { id: "tf-agent", name: "agent_id" }, h("option", { value: "" }, "(none)"),
    agentIds.map((id) => h("option", { value: id, selected: id === t.agent_id }, id)));
  const owner = h("input", { id: "tf-owner", name: "owner", value: t.owner || "" });
  const prio = h("select", { id: "tf-priority", name: "priority" }, PRIORITIES.map((p) => h("option", { value: p, selected: p === t.priority }, p)));
  const tags = h("input", { id: "tf-tags", name: "tags", value: (t.tags || []).join(", "), "aria-describedby": "tf-tags-hint" });
  const due = h("input", { id: "tf-due", name: "due", type: "date", value: t.due_at ? t.due_at.slice(0, 10) : "" });
  const status = h("select", { id: "tf-status", name: "status" }, statuses.map((s) => h("option", { value: s, selected: s === t.status }, statusLabel(s))));
  const error = h("p", { class: "error", role: "alert" });
  const cancel = h("button", { type: "button", class: "quiet" }, "Cancel");
  const save = h("button", { type: "submit" }, task ? "Save" : "Create task");
  const form = h("form", { method: "dialog" },
    h("h2", { id: "tf-heading" }, task ? `Edit task #${task.id}` : "New task"),
    field("tf-title", "Title", title),
    field("tf-description", "Description", desc),
    h("div", { class: "grid2" },
      h("div", {}, field("tf-agent", "Agent", agent)),
      h("div", {}, field("tf-owner", "Owner", owner)),
      h("div", {}, field("tf-priority", "Priority", prio)),
      h("div", {}, field("tf-due", "Due date", due)),
      h("div", {}, field("tf-status", "Status", status)),
      h("div", {}, field("tf-tags", "Tags", tags), h("span", { id: "tf-tags-hint", class: "hint" }, "comma-separated"))),
    error,
    h("div", { class: "form-actions" }, cancel, save));
  const dlg = h("dialog", { "aria-labelledby": "tf-heading", id: "task-dialog" }, form);
  document.body.append(dlg);
  cancel.addEventListener("click", () => dlg.close());
  dlg.addEventListener("close", () => dlg.remove());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const fields = {
      title: title.value, description: desc.value, agent_id: agent.value, owner: owner.value,
      priority: prio.value, status: status.value,
      tags: tags.value.split(",").map((x) => x.trim()).filter(Boolean),
      due_at: due.value ? `${due.value}T00:00:00Z` : (task ? null : undefined),
    };
    save.disabled = true;
    try {
      await onSubmit(fields);
      dlg.close();
    } catch (err) {
      error.textContent = err.message;
    } finally {
      save.disabled = false;
    }
  });
  dlg.showModal();
  title.focus();
  return dlg;
}
