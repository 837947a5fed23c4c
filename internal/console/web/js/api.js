// The console's only way to the gateway: the public /api/v1 API with the
// signed-in credential as a Bearer token. The credential lives in
// sessionStorage (this tab only) and never goes into a URL.

const KEY = "agentry.credential";
export const PREFIX = "/api/v1";

export function credential() { return sessionStorage.getItem(KEY) || ""; }
export function setCredential(c) { sessionStorage.setItem(KEY, c); }
export function clearCredential() { sessionStorage.removeItem(KEY); }

// ApiError carries the gateway's error envelope: {"error": text, "code": ...}.
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || "";
    this.body = body || {};
  }
}

// Listeners told when the gateway refuses the credential (expired token,
// revoked key): the app returns to sign-in.
const unauthorizedListeners = new Set();
export function onUnauthorized(fn) { unauthorizedListeners.add(fn); }

async function errorFrom(resp) {
  let body = null;
  try { body = await resp.json(); } catch { body = { error: `${resp.status} ${resp.statusText}` }; }
  const err = new ApiError(resp.status, body);
  if (resp.status === 401) unauthorizedListeners.forEach((fn) => fn(err));
  return err;
}

function headers(extra, token) {
  const h = new Headers(extra || {});
  const c = token ?? credential();
  if (c) h.set("Authorization", "Bearer " + c);
  return h;
}

// request sends one API call and returns the parsed JSON (or null for 204),
// throwing ApiError for 4xx/5xx answers.
export async function request(method, path, body, opts = {}) {
  const init = { method, headers: headers(opts.headers, opts.token), signal: opts.signal };
  if (body !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(PREFIX + path, init);
  if (!resp.ok) throw await errorFrom(resp);
  if (opts.raw) return resp;
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}
export const get = (path, opts) => request("GET", path, undefined, opts);
export const post = (path, body, opts) => request("POST", path, body, opts);
export const patch = (path, body, opts) => request("PATCH", path, body, opts);

// download fetches a file with the credential and hands it to the browser
// as a download (a plain link could not carry the Authorization header).
export async function download(path, fallbackName) {
  const resp = await request("GET", path, undefined, { raw: true });
  const blob = await resp.blob();
  const disp = resp.headers.get("Content-Disposition") || "";
  const m = /filename="?([^";]+)"?/.exec(disp);
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = m ? m[1] : fallbackName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// parseSSE yields the frames of a text/event-stream body:
// {event, data, id, retry}. Comment lines (": ping") are skipped.
export async function* parseSSE(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener("abort", onAbort);
  let buf = "";
  let frame = { event: "", data: [], id: null, retry: null };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (frame.data.length || frame.event || frame.id !== null || frame.retry !== null) {
            yield { event: frame.event, data: frame.data.join("\n"), hasData: frame.data.length > 0, id: frame.id, retry: frame.retry };
          }
          frame = { event: "", data: [], id: null, retry: null };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") frame.data.push(val);
        else if (field === "event") frame.event = val;
        else if (field === "id") frame.id = val;
        else if (field === "retry" && /^\d+$/.test(val)) frame.retry = Number(val);
      }
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

// EventStream follows GET /api/v1/events through fetch (EventSource cannot
// send the Authorization header). When the connection drops it reconnects
// after the server's retry interval, sending Last-Event-ID so the gateway
// replays what was missed. onEvent gets each event object in id order;
// onState gets "open", "reconnecting" or "closed"; onGap is called when a
// reconnect had no event id to resume from (the caller reloads instead).
export class EventStream {
  constructor(query, { onEvent, onState, onGap, lastEventId = null } = {}) {
    this.query = query;
    this.onEvent = onEvent || (() => {});
    this.onState = onState || (() => {});
    this.onGap = onGap || (() => {});
    this.lastEventId = lastEventId;
    this.retry = 3000;
    this.ctrl = null;
    this.stopped = false;
    this.loop();
  }

  async loop() {
    let failures = 0;
    let connectedOnce = false;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      try {
        const h = headers();
        if (this.lastEventId !== null) h.set("Last-Event-ID", this.lastEventId);
        else if (connectedOnce) this.onGap();
        const resp = await fetch(`${PREFIX}/events${this.query ? "?" + this.query : ""}`, { headers: h, signal: this.ctrl.signal });
        if (!resp.ok) {
          const err = await errorFrom(resp);
          if (resp.status === 401 || resp.status === 400 || resp.status === 403) { this.stop(); this.onState("closed", err); return; }
          throw err;
        }
        connectedOnce = true;
        failures = 0;
        this.onState("open");
        for await (const f of parseSSE(resp.body, this.ctrl.signal)) {
          if (f.retry !== null) this.retry = f.retry;
          if (f.id !== null) this.lastEventId = f.id;
          if (!f.hasData) continue;
          let ev;
          try { ev = JSON.parse(f.data); } catch { continue; }
          this.onEvent(ev);
        }
      } catch (e) {
        if (this.stopped) return;
      }
      if (this.stopped) return;
      failures++;
      this.onState("reconnecting");
      await new Promise((r) => setTimeout(r, Math.min(this.retry * Math.min(failures, 3), 10000)));
    }
  }

  stop() {
    this.stopped = true;
    this.ctrl?.abort();
    this.onState("closed");
  }
}
