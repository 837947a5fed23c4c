// The console shell: sign-in, navigation between pages (#/board,
// #/approvals, #/chat, #/costs, #/agents, #/channels[/<id>], #/memory, #/knowledge, #/builder, #/voice) and returning to sign-in when the credential stops
// working. Each page module exports render(main, ctx) and may return a
// function that stops what it started (streams, timers).
import * as api from "./api.js";
import { clearAlerts, replace } from "./ui.js";
import * as board from "./board.js";
import * as chat from "./chat.js";
import * as costs from "./costs.js";
import * as agents from "./agents.js";
import * as approvals from "./approvals.js";
import * as channels from "./channels.js";
import * as memory from "./memory.js";
import * as knowledge from "./knowledge.js";
import * as builder from "./builder.js";
import * as voice from "./voice.js";

const pages = { board, approvals, chat, costs, agents, channels, memory, knowledge, builder, voice };
const main = document.getElementById("main");
const header = document.querySelector("header.top");
let cleanup = null;
let principal = null;

function stopPage() {
  if (cleanup) { try { cleanup(); } catch { /* page already gone */ } }
  cleanup = null;
}

function showSignIn(message) {
  stopPage();
  principal = null;
  header.hidden = true;
  replace(main, document.getElementById("signin-template").content.cloneNode(true));
  const form = document.getElementById("signin-form");
  const input = document.getElementById("credential");
  const error = document.getElementById("signin-error");
  error.textContent = message || "";
  input.focus();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const cred = input.value.trim();
    error.textContent = "";
    const btn = form.querySelector("button");
    btn.disabled = true;
    try {
      principal = await api.get("/whoami", { token: cred });
      api.setCredential(cred);
      input.value = "";
      start();
    } catch (err) {
      error.textContent = err.status === 401
        ? "Sign-in failed: the gateway did not accept this API key or token. Check it and try again."
        : "Sign-in failed: " + err.message;
      input.select();
    } finally {
      btn.disabled = false;
    }
  });
}

async function start() {
  if (!principal) {
    try {
      principal = await api.get("/whoami");
    } catch (err) {
      api.clearCredential();
      showSignIn(err.status === 401 ? "Your session has ended; sign in again." : "Sign-in failed: " + err.message);
      return;
    }
  }
  header.hidden = false;
  document.getElementById("who").textContent = `${principal.subject} (${principal.role})`;
  route();
}

function route() {
  if (!principal) return;
  const name = (location.hash.match(/^#\/(\w+)/) || [])[1];
  const page = pages[name] ? name : "board";
  if (!pages[name]) { history.replaceState(null, "", "#/board"); }
  stopPage();
  clearAlerts();
  for (const a of header.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  replace(main);
  document.title = `${page[0].toUpperCase()}${page.slice(1)} · Agentry`;
  cleanup = pages[page].render(main, { principal }) || null;
}

api.onUnauthorized(() => {
  if (!principal) return;
  api.clearCredential();
  showSignIn("Your session has expired or the key was revoked; sign in again.");
});

document.getElementById("signout").addEventListener("click", () => {
  api.clearCredential();
  showSignIn("");
});
window.addEventListener("hashchange", route);

if (api.credential()) start(); else showSignIn("");
