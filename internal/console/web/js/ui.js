// Small DOM helpers shared by the pages. Text always goes in as text nodes
// (never innerHTML), so nothing an agent or a user wrote can run as markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// replace sets el's children, skipping null/undefined/false like h() does
// (the DOM's own replaceChildren would print them as text).
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

// showError puts an API error's own text (the envelope's "error") in the
// alert area, where screen readers announce it.
export function showError(err, context) {
  const text = err && err.message ? err.message : String(err);
  notify((context ? context + ": " : "") + text, "error");
}

export function notify(text, kind = "info") {
  const box = document.getElementById("alerts");
  const close = h("button", { type: "button", class: "quiet", "aria-label": "Dismiss" }, "×");
  const el = h("div", { class: "alert " + kind, dataset: { kind } }, h("p", {}, text), close);
  close.addEventListener("click", () => el.remove());
  box.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 15000 : 5000);
}

export function clearAlerts() { document.getElementById("alerts").replaceChildren(); }

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function fmtDate(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleDateString();
}

export function usd(v) {
  if (v === null || v === undefined) return "—";
  const n = Number(v);
  return "$" + (Math.abs(n) >= 1 ? n.toFixed(2) : n.toFixed(6).replace(/0{1,3}$/, ""));
}

export function statusLabel(s) { return String(s || "").replace(/_/g, " "); }
