// The builder (docs/builder.md): describe an agent, see the draft and the
// diff of each refinement, try it in a chat pane before it exists, and save
// it. Every request is its own builder run under the per-build allowance;
// what it spent is shown under the draft.
import * as api from "./api.js";
import { h, replace, showError, notify } from "./ui.js";

export function render(main) {
  const desc = h("textarea", { id: "builder-description", rows: "3", required: true, maxlength: "16384",
    placeholder: "Describe the agent: what it does, for whom, which tools it needs" });
  const genForm = h("form", { id: "builder-generate", class: "row" },
    h("label", { for: "builder-description" }, "Description"), desc, h("button", { type: "submit" }, "Generate"));
  const def = h("textarea", { id: "builder-definition", rows: "14", spellcheck: "false", "aria-label": "Draft definition (YAML)" });
  const spent = h("p", { id: "builder-spent", class: "muted", "aria-live": "polite" });
  const instruction = h("input", { id: "builder-instruction", type: "text", maxlength: "16384", placeholder: "What to change" });
  const refineForm = h("form", { id: "builder-refine", class: "row" },
    h("label", { for: "builder-instruction" }, "Refine"), instruction, h("button", { type: "submit" }, "Refine"));
  const diff = h("pre", { id: "builder-diff", class: "args", "aria-label": "Diff of the last refinement" });
  const tryText = h("input", { id: "builder-try-text", type: "text", maxlength: "16384", placeholder: "Say something to the draft" });
  const tryLog = h("div", { id: "builder-try-log", class: "chat", "aria-live": "polite" });
  const tryForm = h("form", { id: "builder-try", class: "row" },
    h("label", { for: "builder-try-text" }, "Try it"), tryText, h("button", { type: "submit" }, "Send"));
  const enabled = h("input", { id: "builder-enabled", type: "checkbox" });
  const overwrite = h("input", { id: "builder-overwrite", type: "checkbox" });
  const saveForm = h("form", { id: "builder-save", class: "row" },
    h("label", {}, enabled, " enabled"), h("label", {}, overwrite, " replace an agent with the same id"),
    h("button", { type: "submit" }, "Save"));
  const draft = h("section", { id: "builder-draft", hidden: true },
    h("h2", {}, "Draft"), def, spent, refineForm, diff, h("h2", {}, "Chat with the draft"), tryLog, tryForm, saveForm);
  main.append(h("h1", {}, "Builder"), genForm, draft);

  const showSpent = (s) => {
    spent.textContent = `Run ${s.run_id}: ${s.calls} call(s), ${s.input_tokens} input + ${s.output_tokens} output tokens, $${s.cost_usd.toFixed(6)}`;
  };
  const busy = async (form, fn) => {
    const btn = form.querySelector("button[type=submit]");
    btn.disabled = true;
    try { await fn(); } finally { btn.disabled = false; }
  };

  genForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(genForm, async () => {
      try {
        const d = await api.post("/builder/generate", { description: desc.value });
        def.value = d.definition;
        diff.textContent = "";
        replace(tryLog);
        showSpent(d.spent);
        draft.hidden = false;
      } catch (err) { showError(err, "Generate"); }
    });
  });
  refineForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(refineForm, async () => {
      try {
        const d = await api.post("/builder/refine", { definition: def.value, instruction: instruction.value });
        def.value = d.definition;
        diff.textContent = d.diff || "(no change)";
        showSpent(d.spent);
      } catch (err) { showError(err, "Refine"); }
    });
  });
  tryForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = tryText.value;
    if (!text.trim()) { return; }
    busy(tryForm, async () => {
      try {
        const r = await api.post("/builder/try", { definition: def.value, text });
        tryLog.append(h("div", { class: "msg user" }, text), h("div", { class: "msg agent" }, r.reply));
        tryText.value = "";
        showSpent(r.spent);
      } catch (err) { showError(err, "Try"); }
    });
  });
  saveForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(saveForm, async () => {
      try {
        const r = await api.post("/builder/build", { definition: def.value, enabled: enabled.checked, overwrite: overwrite.checked });
        notify(`Agent ${r.id} saved (${r.enabled ? "enabled" : "disabled"}).`);
        saveForm.dataset.saved = r.id;
      } catch (err) { showError(err, "Save"); }
    });
  });
}
