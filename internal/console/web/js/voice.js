// Push-to-talk (docs/voice.md): mint a realtime session for an agent with
// voice (POST /voice/sessions; the provider key stays on the gateway), talk
// to the provider's realtime WebSocket with the short-lived client secret
// while the button is held, hear the answer and read both transcripts.
import * as api from "./api.js";
import { h, replace, showError } from "./ui.js";

const RATE = 24000; // pcm16 mono at 24 kHz, the realtime API's audio format

function toBase64(int16) {
  const bytes = new Uint8Array(int16.buffer);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) { bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000)); }
  return btoa(bin);
}

export function render(main) {
  const agent = h("select", { id: "voice-agent", "aria-label": "Agent" });
  const start = h("button", { type: "button", id: "voice-start" }, "Start session");
  const talk = h("button", { type: "button", id: "voice-talk", disabled: true, "aria-pressed": "false" }, "Hold to talk");
  const end = h("button", { type: "button", id: "voice-end", class: "quiet", disabled: true }, "End");
  const status = h("p", { id: "voice-status", class: "muted", "aria-live": "polite" }, "Not connected.");
  const log = h("div", { id: "voice-log", class: "chat", "aria-live": "polite" });
  main.append(h("h1", {}, "Voice"), h("div", { class: "row" }, h("label", { for: "voice-agent" }, "Agent"), agent, start, talk, end), status, log);

  let ws = null, ctx = null, stream = null, proc = null, talking = false, playAt = 0, reply = null;
  const setStatus = (t, state) => { status.textContent = t; status.dataset.state = state || ""; };

  function stop() {
    talking = false;
    if (proc) { proc.disconnect(); proc = null; }
    if (stream) { stream.getTracks().forEach((t) => t.stop()); stream = null; }
    if (ws) { ws.close(); ws = null; }
    if (ctx) { ctx.close(); ctx = null; }
    talk.disabled = true; end.disabled = true; start.disabled = false;
  }

  function play(b64) {
    const raw = atob(b64);
    const n = raw.length >> 1;
    const buf = ctx.createBuffer(1, n, RATE);
    const ch = buf.getChannelData(0);
    for (let i = 0; i < n; i++) {
      const v = raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8);
      ch[i] = (v >= 0x8000 ? v - 0x10000 : v) / 0x8000;
    }
    const src = ctx.createBufferSource();
    src.buffer = buf;
    src.connect(ctx.destination);
    playAt = Math.max(playAt, ctx.currentTime);
    src.start(playAt);
    playAt += buf.duration;
  }

  function onEvent(ev) {
    switch (ev.type) {
      case "conversation.item.input_audio_transcription.completed":
        log.append(h("div", { class: "msg user" }, ev.transcript));
        break;
      case "response.output_audio_transcript.delta":
        if (!reply) { reply = h("div", { class: "msg agent" }); log.append(reply); }
        reply.textContent += ev.delta;
        break;
      case "response.output_audio.delta":
        play(ev.delta);
        break;
      case "response.done": {
        const u = (ev.response && ev.response.usage) || {};
        if (reply) { reply.dataset.done = "true"; }
        reply = null;
        setStatus(`Connected. Last answer: ${u.input_tokens || 0} input + ${u.output_tokens || 0} output tokens.`, "connected");
        break;
      }
      case "error":
        setStatus("Provider error: " + ((ev.error && ev.error.message) || "unknown"), "error");
        break;
    }
  }

  start.addEventListener("click", async () => {
    start.disabled = true;
    try {
      const s = await api.post("/voice/sessions", { agent_id: agent.value });
      ctx = new AudioContext({ sampleRate: RATE });
      stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, sampleRate: RATE } });
      const source = ctx.createMediaStreamSource(stream);
      proc = ctx.createScriptProcessor(4096, 1, 1);
      proc.onaudioprocess = (e) => {
        if (!talking || !ws || ws.readyState !== WebSocket.OPEN) { return; }
        const f = e.inputBuffer.getChannelData(0);
        const pcm = new Int16Array(f.length);
        for (let i = 0; i < f.length; i++) { pcm[i] = Math.max(-1, Math.min(1, f[i])) * 0x7fff; }
        ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: toBase64(pcm) }));
      };
      source.connect(proc);
      proc.connect(ctx.destination);
      ws = new WebSocket(s.url, ["realtime", "openai-insecure-api-key." + s.client_secret]);
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: "session.update", session: { type: "realtime" } }));
        talk.disabled = false; end.disabled = false;
        setStatus(`Connected to ${s.agent_id} (at most ${s.max_seconds} s).`, "connected");
      };
      ws.onmessage = (m) => { try { onEvent(JSON.parse(m.data)); } catch { /* not JSON */ } };
      ws.onclose = () => { if (ws) { setStatus("Session ended.", "ended"); stop(); } };
    } catch (err) {
      showError(err, "Voice");
      stop();
    }
  });
  const press = (e) => {
    e.preventDefault();
    if (talk.disabled) { return; }
    talking = true;
    talk.setAttribute("aria-pressed", "true");
  };
  const release = () => {
    if (!talking) { return; }
    talking = false;
    talk.setAttribute("aria-pressed", "false");
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
      ws.send(JSON.stringify({ type: "response.create" }));
    }
  };
  talk.addEventListener("pointerdown", press);
  talk.addEventListener("pointerup", release);
  talk.addEventListener("pointerleave", release);
  talk.addEventListener("keydown", (e) => { if (e.key === " " && !e.repeat) { press(e); } });
  talk.addEventListener("keyup", (e) => { if (e.key === " ") { release(); } });
  end.addEventListener("click", () => { setStatus("Session ended.", "ended"); stop(); });

  (async () => {
    try {
      const { agents } = await api.get("/agents");
      replace(agent, agents.map((a) => h("option", { value: a.id }, a.id)));
    } catch (err) { showError(err, "Agents"); }
  })();
  return stop;
}
