// Drives the gateway's OpenAI-compatible endpoint with the official OpenAI
// Node SDK, as an application would (e2e/openai_compat_test.go runs it).
// Env: OPENAI_BASE_URL (http://127.0.0.1:PORT/v1), OPENAI_API_KEY, MODEL,
// BUDGET_MODEL (an agent whose budget allows one call). Prints one JSON
// object: what each step saw. Exit 0 unless the script itself broke.
import OpenAI, { APIError } from "openai";

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const model = process.env.MODEL;
const out = {};

const done = await client.chat.completions.create({
  model,
  messages: [{ role: "system", content: "ignored" }, { role: "user", content: "hello from node" }],
  user: "node-user",
});
out.reply = done.choices[0].message.content;
out.finish_reason = done.choices[0].finish_reason;
out.object = done.object;
out.usage = done.usage;

const stream = await client.chat.completions.create({
  model, stream: true, stream_options: { include_usage: true },
  messages: [{ role: "user", content: "stream from node" }],
});
let text = "", chunks = 0, finish = null, usage = null;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    text += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
out.stream = { text, chunks, finish_reason: finish, usage };

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

async function expectError(f) {
  try {
    await f();
    return { ok: true };
  } catch (e) {
    if (!(e instanceof APIError)) return { typed: false, name: e?.constructor?.name, message: String(e) };
    return { typed: true, class: e.constructor.name, status: e.status, code: e.code, type: e.type, param: e.param, message: e.message };
  }
}
const budget = { model: process.env.BUDGET_MODEL, messages: [{ role: "user", content: "spend" }] };
out.budget_first = await expectError(() => client.chat.completions.create(budget));
out.budget_second = await expectError(() => client.chat.completions.create(budget));
out.budget_stream = await expectError(async () => {
  const s = await client.chat.completions.create({ ...budget, stream: true });
  for await (const _ of s) { /* drain */ }
});
out.bad_n = await expectError(() => client.chat.completions.create({ model, n: 2, messages: [{ role: "user", content: "x" }] }));
out.unknown_model = await expectError(() => client.chat.completions.create({ model: "agent/nope", messages: [{ role: "user", content: "x" }] }));
console.log(JSON.stringify(out));
