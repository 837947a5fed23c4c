// Chat: pick an agent, send a message, watch the reply stream in
// (POST /chat/stream), rate it. Data lines are the reply's text; the ids
// of the conversation come from the X-Agentry-*-Id response headers, or
// from a "done" event's JSON when the gateway sends one.
import * as api from "./api.js";
import { h, replace, showError } from "./ui.js";

const ID_HEADERS = { session_id: "X-Agentry-Session-Id", run_id: "X-Agentry-Run-Id", response_id: "X-Agentry-Response-Id" };

export function render(main) {
  let sessionId = "";
  let abort = null;
  const agentSel = h("select", { id: "chat-agent" });
  const messages = h("div", { class: "messages", id: "messages", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = h("textarea", { id: "chat-input", rows: "2", required: true, "aria-label": "Message" });
  const send = h("button", { type: "submit", id: "chat-send" }, "Send");
  const form = h("form", {}, input, send);
  const newChat = h("button", { type: "button", class: "quiet" }, "New conversation");
  main.append(h("div", { class: "chat" },
    h("div", { class: "toolbar" }, h("h1", {}, "Chat"), h("label", { for: "chat-agent" }, "Agent"), agentSel, newChat),
    messages, form));

  api.get("/agents").then(({ agents }) => {
    replace(agentSel, ...agents.map((a) => h("option", { value: a.id }, a.description ? `${a.id} — ${a.description}` : a.id)));
    if (!agents.length) agentSel.append(h("option", { value: "" }, "(no agents)"));
  }).catch((err) => showError(err, "Agents"));
  agentSel.addEventListener("change", () => { sessionId = ""; });
  newChat.addEventListener("click", () => { sessionId = ""; replace(messages); });
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); } });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    const agentId = agentSel.value;
    if (!text || !agentId) return;
    input.value = "";
    messages.append(h("div", { class: "msg user" }, text));
    const body = h("div", { class: "body" });
    const bubble = h("div", { class: "msg agent", "aria-busy": "true" }, body);
    messages.append(bubble);
    send.disabled = true;
    abort = new AbortController();
    const ids = { session_id: "", run_id: "", response_id: "" };
    try {
      const resp = await api.request("POST", "/chat/stream", { agent_id: agentId, text, session_id: sessionId || undefined }, { raw: true, signal: abort.signal });
      for (const [k, name] of Object.entries(ID_HEADERS)) ids[k] = resp.headers.get(name) || "";
      for await (const f of api.parseSSE(resp.body, abort.signal)) {
        if (f.event === "error") {
          let msg = f.data;
          try { msg = JSON.parse(f.data).error || msg; } catch { /* plain text */ }
          throw new Error(msg);
        }
        if (f.event === "done" || f.event === "ids") {
          try { for (const [k, v] of Object.entries(JSON.parse(f.data))) if (k in ids && v) ids[k] = v; } catch { /* not JSON */ }
          continue;
        }
        if (f.event || !f.hasData) continue;
        if (f.data === "[DONE]") break;
        body.append(f.data); // each frame is the next piece of the text
        messages.scrollTop = messages.scrollHeight;
      }
      sessionId = ids.session_id || sessionId;
      bubble.dataset.done = "true";
      if (ids.response_id) bubble.append(feedback(agentId, ids));
    } catch (err) {
      if (err.name !== "AbortError") {
        bubble.classList.add("failed");
        bubble.append(h("p", { class: "error" }, err.message));
      }
    } finally {
      bubble.setAttribute("aria-busy", "false");
      send.disabled = false;
      input.focus();
    }
  });

  function feedback(agentId, ids) {
    const up = h("button", { type: "button", class: "quiet", "aria-label": "Helpful" }, "Helpful");
    const down = h("button", { type: "button", class: "quiet", "aria-label": "Not helpful" }, "Not helpful");
    const box = h("div", { class: "feedback" }, up, down);
    const rate = async (rating) => {
      try {
        await api.post("/chat/feedback", { agent_id: agentId, ...ids, rating });
        replace(box, h("span", { class: "muted", role: "status" }, "Thanks for the feedback."));
      } catch (err) { showError(err, "Feedback"); }
    };
    up.addEventListener("click", () => rate(1));
    down.addEventListener("click", () => rate(-1));
    return box;
  }

  return () => abort?.abort();
}
