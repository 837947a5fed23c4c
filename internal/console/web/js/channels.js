// Channels: every channel (the outbound webhook and the messaging
// platforms) with its adapter's state, message counts, the last message and
// the last error, refreshed every few seconds; Enable/Disable. #/channels/<id>
// opens one channel: its settings (as the API returns them: credentials
// redacted), the ingress URL to register for callback-mode channels, the
// recent inbound messages, and for WhatsApp the pairing QR code (a PNG drawn
// by the gateway, GET /channels/{id}/qr.png, fetched with the credential).
import * as api from "./api.js";
import { h, replace, showError, fmtTime, notify, statusLabel } from "./ui.js";
import { temporalBase } from "./taskpanel.js";

const REFRESH_MS = 3000;
// Modes in which the platform calls the gateway (POST /ingress/<id>): the
// operator registers the URL with the platform.
const CALLBACK_MODES = new Set(["webhook", "events"]);
const PAIRED_TYPES = new Set(["whatsapp"]);

const enc = encodeURIComponent;

export function render(main, { principal }) {
  const id = decodeURIComponent((location.hash.match(/^#\/channels\/([^/?#]+)/) || [])[1] || "");
  return id ? detail(main, id, principal) : list(main);
}

function stateClass(state) {
  if (state === "connected" || state === "paired") return "status-done";
  if (state === "error" || state === "unauthorized") return "status-failed";
  if (state === "pairing" || state === "connecting") return "status-waiting";
  return "muted";
}

function adapterCell(ch) {
  if (!ch.adapter) return h("span", { class: "muted" }, "outbound only");
  const a = ch.adapter;
  return [h("span", { class: "state " + stateClass(a.state), dataset: { state: a.state } }, statusLabel(a.state)),
    a.since ? h("div", { class: "muted" }, "since ", fmtTime(a.since)) : null];
}

// lastError is the newest of the adapter's, the last message's and the
// last delivery's errors.
function lastError(ch) {
  const errs = [];
  if (ch.adapter?.last_error) errs.push([ch.adapter.last_error_at || "", ch.adapter.last_error]);
  if (ch.messages?.last_error) errs.push([ch.messages.last_message_at || "", ch.messages.last_error]);
  if (ch.status?.last_error) errs.push([ch.status.last_delivery_at || "", ch.status.last_error]);
  errs.sort((x, y) => String(y[0]).localeCompare(String(x[0])));
  return errs[0] || null;
}

function toggleButton(ch, after) {
  const b = h("button", { type: "button", class: ch.enabled ? "quiet" : "", dataset: { channel: ch.id, action: ch.enabled ? "disable" : "enable" } },
    ch.enabled ? "Disable" : "Enable");
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await api.post(`/channels/${enc(ch.id)}/${ch.enabled ? "disable" : "enable"}`);
      notify(`Channel ${ch.id} ${ch.enabled ? "disabled" : "enabled"}.`);
      after();
    } catch (err) { showError(err, `Channel ${ch.id}`); b.disabled = false; }
  });
  return b;
}

function list(main) {
  const wrap = h("div", { class: "table-wrap", id: "channels", "aria-busy": "true" });
  main.append(h("h1", {}, "Channels"), wrap);
  let stopped = false;

  async function load() {
    try {
      const { channels } = await api.get("/channels");
      if (stopped) return;
      replace(wrap, h("table", {},
        h("thead", {}, h("tr", {}, ["Channel", "Type", "Enabled", "Adapter", "Received", "Answered", "Failed", "Last message", "Last error", ""]
          .map((c, i) => h("th", { scope: "col", class: i >= 4 && i <= 6 ? "num" : null }, c)))),
        h("tbody", {}, channels.map((ch) => row(ch)))));
      wrap.setAttribute("aria-busy", "false");
      wrap.dataset.ready = "true";
    } catch (err) { if (!stopped) showError(err, "Channels"); }
  }

  function row(ch) {
    const m = ch.messages;
    const err = lastError(ch);
    return h("tr", { dataset: { channel: ch.id } },
      h("th", { scope: "row" }, h("a", { href: `#/channels/${enc(ch.id)}` }, ch.id)),
      h("td", {}, ch.type),
      h("td", {}, ch.enabled ? "enabled" : h("span", { class: "muted" }, "disabled")),
      h("td", { class: "adapter" }, adapterCell(ch)),
      // The webhook channel receives nothing: its counts are deliveries.
      h("td", { class: "num received" }, m ? m.received : "—"),
      h("td", { class: "num answered" }, m ? m.answered : (ch.status?.deliveries ?? 0) + " sent"),
      h("td", { class: "num failed" + ((m ? m.failed : ch.status?.failures) ? " error" : "") }, m ? m.failed : (ch.status?.failures ?? 0)),
      h("td", { class: "last" }, m?.last_message_at ? [fmtTime(m.last_message_at), h("div", { class: "muted" }, "chat ", m.last_chat, m.last_status ? ` · ${statusLabel(m.last_status)}` : "")]
        : ch.status?.last_delivery_at ? [fmtTime(ch.status.last_delivery_at), h("div", { class: "muted" }, statusLabel(ch.status.last_status))] : "—"),
      h("td", { class: "last-error" }, err ? h("span", { class: "error" }, err[1], err[0] ? h("div", { class: "muted" }, fmtTime(err[0])) : null) : "—"),
      h("td", {}, toggleButton(ch, load)));
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => { stopped = true; clearInterval(timer); };
}

function detail(main, id, principal) {
  const isAdmin = principal?.role === "admin";
  const head = h("div", { class: "toolbar" }, h("h1", {}, "Channel ", id), h("a", { href: "#/channels" }, "All channels"));
  const summary = h("div", { id: "channel-summary", "aria-busy": "true" });
  const pairing = h("section", { id: "channel-pairing", hidden: true, "aria-live": "polite" });
  const settings = h("section", { id: "channel-settings" });
  const messages = h("section", { id: "channel-messages" });
  main.append(head, summary, pairing, settings, messages);
  let stopped = false;
  let qrText = "";      // the code the image shows
  let qrURL = null;     // its blob: URL
  const dropQR = () => { if (qrURL) URL.revokeObjectURL(qrURL); qrURL = null; qrText = ""; };

  let busy = false;
  async function load() {
    if (busy) return; // a slow answer: skip this tick rather than pile up
    busy = true;
    try { await refresh(); } finally { busy = false; }
  }

  async function refresh() {
    let ch;
    try {
      ch = await api.get(`/channels/${enc(id)}`);
    } catch (err) {
      if (!stopped) { showError(err, `Channel ${id}`); replace(summary, h("p", { class: "error" }, err.message)); }
      return;
    }
    if (stopped) return;
    const err = lastError(ch);
    replace(summary, h("div", { class: "cards-row" },
      h("div", { class: "stat" }, h("div", { class: "muted" }, ch.type), h("div", { class: "big" }, adapterCell(ch)),
        h("div", {}, ch.enabled ? "enabled" : "disabled", " ", toggleButton(ch, load))),
      ch.messages ? h("div", { class: "stat" }, h("div", { class: "muted" }, "Messages"),
        h("div", { class: "big" }, `${ch.messages.answered} / ${ch.messages.received}`),
        h("div", {}, "answered of received", ch.messages.failed ? h("span", { class: "error" }, ` · ${ch.messages.failed} failed`) : null,
          ch.adapter?.ignored ? ` · ${ch.adapter.ignored} ignored` : ""),
        ch.messages.last_message_at ? h("div", { class: "muted" }, "last ", fmtTime(ch.messages.last_message_at), " in chat ", ch.messages.last_chat) : null) : null,
      h("div", { class: "stat" }, h("div", { class: "muted" }, "Replies and reports sent"),
        h("div", { class: "big" }, ch.status?.deliveries ?? 0),
        h("div", {}, `${ch.status?.pending ?? 0} pending`, ch.status?.failures ? h("span", { class: "error" }, ` · ${ch.status.failures} failed`) : null)),
      err ? h("div", { class: "stat", id: "channel-last-error" }, h("div", { class: "muted" }, "Last error ", fmtTime(err[0])), h("div", { class: "error" }, err[1])) : null));
    summary.setAttribute("aria-busy", "false");
    summary.dataset.ready = "true";
    summary.dataset.state = ch.adapter?.state || "";
    renderSettings(ch);
    if (PAIRED_TYPES.has(ch.type)) await renderPairing(ch);
    if (ch.messages) await loadMessages();
  }

  function renderSettings(ch) {
    const s = ch.settings || {};
    const over = new Set(ch.overridden || []);
    const mode = s.mode || "";
    const ingress = s.ingress_path ? (s.public_url || location.origin + s.ingress_path) : "";
    replace(settings, h("h2", {}, "Settings"),
      ingress && CALLBACK_MODES.has(mode)
        ? h("p", { id: "channel-ingress" }, `Register this URL with the platform (${mode} mode): `, h("code", {}, ingress),
          s.public_url ? null : h("span", { class: "muted" }, " (this console's address; the platform must be able to reach it)"))
        : s.ingress_path ? h("p", { class: "muted" }, `Receives over its own connection (${mode || "no mode"}): no URL to register.`) : null,
      h("dl", { class: "settings" }, Object.keys(s).sort().flatMap((k) => [
        h("dt", {}, k, over.has(k) ? h("span", { class: "chip", title: "changed through the API" }, "changed") : null),
        h("dd", { dataset: { key: k } }, fmtValue(s[k]))])));
  }

  async function renderPairing(ch) {
    const a = ch.adapter || {};
    const d = a.detail || {};
    pairing.hidden = false;
    const parts = [h("h2", {}, "Pairing")];
    if (!isAdmin) parts.push(h("p", { class: "muted" }, "Pairing needs the admin role: whoever scans the code links the device."));
    if (a.state === "pairing" && d.qr) {
      if (d.qr !== qrText && isAdmin) {
        try {
          const resp = await api.request("GET", `/channels/${enc(id)}/qr.png`, undefined, { raw: true });
          const url = URL.createObjectURL(await resp.blob());
          if (stopped) { URL.revokeObjectURL(url); return; }
          dropQR();
          qrURL = url;
          qrText = d.qr;
        } catch (err) { showError(err, "Pairing code"); }
      }
      parts.push(h("p", {}, "On the phone: WhatsApp → Settings → Linked devices → Link a device, then scan this code. It changes every few seconds; this page follows it."),
        qrURL ? h("img", { id: "channel-qr", src: qrURL, width: 320, height: 320, alt: "WhatsApp pairing QR code", dataset: { code: qrText } }) : null);
    } else {
      dropQR();
      if (a.state === "paired" || d.jid) {
        parts.push(h("p", { id: "channel-paired" }, "Paired as ", h("strong", {}, d.jid || "(unknown)")));
      } else {
        parts.push(h("p", { class: "muted" }, ch.enabled ? "Not paired." : "Enable the channel to pair it."));
      }
    }
    const paired = a.state === "paired" || !!d.jid;
    const action = paired ? "unpair" : "pair";
    const btn = h("button", { type: "button", id: "channel-" + action, class: paired ? "danger" : null,
      disabled: !isAdmin || !ch.enabled || a.state === "pairing" }, paired ? "Unpair" : "Pair");
    btn.addEventListener("click", async () => {
      if (paired && !confirm(`Log ${id}'s device out of WhatsApp?`)) return;
      btn.disabled = true;
      try {
        await api.post(`/channels/${enc(id)}/${action}`);
        notify(paired ? `Channel ${id} unpaired.` : "Pairing started: the code appears in a moment.");
      } catch (err) { showError(err, `${paired ? "Unpair" : "Pair"} ${id}`); }
      load();
    });
    parts.push(h("div", { class: "form-actions left" }, btn));
    replace(pairing, parts);
    pairing.dataset.state = a.state || "";
  }

  async function loadMessages() {
    try {
      const [{ messages: rows }, ui] = await Promise.all([api.get(`/channels/${enc(id)}/messages?limit=50`), isAdmin ? temporalBase() : null]);
      if (stopped) return;
      replace(messages, h("h2", {}, "Recent messages"),
        rows.length ? h("div", { class: "table-wrap" }, h("table", { id: "channel-message-table" },
          h("thead", {}, h("tr", {}, ["Received", "Chat", "User", "Status", "Run", "Reply ids", "Answered", "Error"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, rows.map((m) => h("tr", { dataset: { message: m.message_id, status: m.status } },
            h("td", {}, fmtTime(m.received_at), h("div", { class: "muted" }, "#", m.message_id)),
            h("td", {}, m.chat_id, m.thread_id ? h("div", { class: "muted" }, "thread ", m.thread_id) : null),
            h("td", {}, m.user_id),
            h("td", { class: m.status === "answered" ? "status-done" : m.status === "failed" ? "status-failed" : "" }, statusLabel(m.status)),
            h("td", { class: "run" }, m.run_id ? (ui ? h("a", { href: `${ui.base}/namespaces/${enc(ui.ns)}/workflows/${enc(m.run_id)}`, target: "_blank", rel: "noopener" }, m.run_id)
              : h("code", {}, m.run_id)) : "—"),
            h("td", {}, (m.reply_ids || []).join(", ") || "—"),
            h("td", {}, m.answered_at ? fmtTime(m.answered_at) : "—"),
            h("td", {}, m.error ? h("span", { class: "error" }, m.error) : ""))))))
          : h("p", { class: "muted empty" }, "No messages received yet."));
    } catch (err) { if (!stopped) showError(err, "Messages"); }
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => { stopped = true; clearInterval(timer); dropQR(); };
}

function fmtValue(v) {
  if (Array.isArray(v)) return v.length ? v.join(", ") : "—";
  if (v === "" || v === null || v === undefined) return "—";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
