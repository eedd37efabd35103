// @langchain/langgraph-sdk's client.crons and client.store, unmodified, against turnstile. Run by
// cmd/turnstile/integration (TestLangGraphCronsStore), which starts the stack and sets
// TURNSTILE_URL; by hand: TURNSTILE_URL=http://127.0.0.1:8080 node --test test/crons-store.test.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.TURNSTILE_URL;
assert.ok(apiUrl, "TURNSTILE_URL must name the stack (set by the Go test)");
const client = new Client({ apiUrl, apiKey: process.env.TURNSTILE_API_KEY || undefined });

const human = (content) => ({ messages: [{ type: "human", content }] });
// refused checks a legible refusal: its status and the feature its detail names.
const refused = (status, words) => (e) => e.status === status && e.message.includes(words);

// waitRuns polls a thread's runs until there are at least n.
async function waitRuns(threadId, n, timeoutMs = 30000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const runs = await client.runs.list(threadId);
    if (runs.length >= n) return runs;
    if (Date.now() > until) assert.fail(`thread ${threadId} has ${runs.length} runs, want ${n}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("crons.createForThread fires runs on the thread every second", async () => {
  const { thread_id } = await client.threads.create();
  const cron = await client.crons.createForThread(thread_id, "agent", {
    schedule: "* * * * * *",
    input: human("tick"),
    metadata: { job: "ticker" },
    multitaskStrategy: "enqueue",
  });
  assert.equal(cron.thread_id, thread_id);
  assert.equal(cron.assistant_id, "agent");
  assert.equal(cron.schedule, "* * * * * *");
  assert.equal(cron.metadata.job, "ticker");
  assert.equal(cron.enabled, true);
  assert.ok(cron.next_run_date);
  const runs = await waitRuns(thread_id, 2);
  assert.equal(runs[0].assistant_id, "agent");
  await client.crons.delete(cron.cron_id);
  await assert.rejects(client.crons.delete(cron.cron_id), (e) => e.status === 404);
});

test("crons.create, search, count, update and delete", async () => {
  const tag = crypto.randomUUID();
  const daily = await client.crons.create("agent", {
    schedule: "0 9 * * *",
    timezone: "Europe/Paris",
    input: human("report"),
    metadata: { tag },
  });
  assert.equal(daily.thread_id, null);
  assert.equal(daily.timezone, "Europe/Paris");
  assert.equal(daily.on_run_completed, "delete");
  const { thread_id } = await client.threads.create();
  const onThread = await client.crons.createForThread(thread_id, "agent", {
    schedule: "@hourly",
    input: human("hourly"),
    metadata: { tag },
  });

  const found = await client.crons.search({ metadata: { tag } });
  assert.deepEqual(found.map((c) => c.cron_id).sort(), [daily.cron_id, onThread.cron_id].sort());
  const ofThread = await client.crons.search({ threadId: thread_id });
  assert.deepEqual(ofThread.map((c) => c.cron_id), [onThread.cron_id]);
  assert.equal(await client.crons.count({ metadata: { tag } }), 2);
  assert.equal(await client.crons.count({ metadata: { tag }, assistantId: "agent" }), 2);
  assert.equal(await client.crons.count({ metadata: { tag }, assistantId: "other" }), 0);
  const page = await client.crons.search({ metadata: { tag }, limit: 1, offset: 1, sortBy: "created_at" });
  assert.deepEqual(page.map((c) => c.cron_id), [onThread.cron_id]);

  const updated = await client.crons.update(daily.cron_id, { schedule: "30 10 * * *", enabled: false });
  assert.equal(updated.schedule, "30 10 * * *");
  assert.equal(updated.enabled, false);
  assert.equal(updated.next_run_date, null);
  assert.equal(await client.crons.count({ metadata: { tag } }), 2);
  const disabled = await client.crons.search({ metadata: { tag }, enabled: false });
  assert.deepEqual(disabled.map((c) => c.cron_id), [daily.cron_id]);

  await client.crons.delete(daily.cron_id);
  await client.crons.delete(onThread.cron_id);
  assert.equal(await client.crons.count({ metadata: { tag } }), 0);
});

test("crons refuse what they cannot do, legibly", async () => {
  await assert.rejects(client.crons.create("agent", { schedule: "every day", input: human("x") }), refused(422, "cron expression"));
  await assert.rejects(client.crons.create("nobody", { schedule: "@daily", input: human("x") }), (e) => e.status === 404);
  await assert.rejects(
    client.crons.create("agent", { schedule: "@daily", input: human("x"), onRunCompleted: "keep" }),
    refused(422, "on_run_completed"),
  );
  await assert.rejects(
    client.crons.create("agent", { schedule: "@daily", input: human("x"), webhook: "https://example.com/hook" }),
    refused(422, "webhook"),
  );
  await assert.rejects(client.crons.createForThread(crypto.randomUUID(), "agent", { schedule: "@daily", input: human("x") }), (e) => e.status === 404);
  await assert.rejects(client.crons.update(crypto.randomUUID(), { enabled: false }), (e) => e.status === 404);
  await assert.rejects(client.crons.search({ sortBy: "assistant_id" }), refused(422, "sort_by"));
});

test("store.putItem, getItem, deleteItem with ttl", async () => {
  const ns = ["users", crypto.randomUUID(), "prefs"];
  await client.store.putItem(ns, "theme", { color: "dark" });
  const item = await client.store.getItem(ns, "theme");
  assert.deepEqual(item.namespace, ns);
  assert.equal(item.key, "theme");
  assert.deepEqual(item.value, { color: "dark" });
  assert.ok(item.createdAt && item.updatedAt);
  await client.store.putItem(ns, "theme", { color: "light" }, { ttl: 5 });
  assert.deepEqual((await client.store.getItem(ns, "theme", { refreshTtl: true })).value, { color: "light" });
  await client.store.deleteItem(ns, "theme");
  assert.equal(await client.store.getItem(ns, "theme"), null);
  assert.equal(await client.store.getItem(ns, "never"), null);
});

test("store.searchItems by prefix and filter, and listNamespaces", async () => {
  const user = crypto.randomUUID();
  await client.store.putItem([user, "memories"], "a", { kind: "fact", text: "likes tea" });
  await client.store.putItem([user, "memories"], "b", { kind: "event", text: "went to Paris" });
  await client.store.putItem([user, "memories", "work"], "c", { kind: "fact", text: "writes Go" });
  await client.store.putItem([user, "settings"], "d", { kind: "fact" });

  const all = await client.store.searchItems([user, "memories"]);
  assert.deepEqual(all.items.map((i) => i.key), ["a", "b", "c"]);
  const facts = await client.store.searchItems([user], { filter: { kind: "fact" }, limit: 2 });
  assert.deepEqual(facts.items.map((i) => i.key), ["a", "c"]);
  const next = await client.store.searchItems([user], { filter: { kind: "fact" }, limit: 2, offset: 2 });
  assert.deepEqual(next.items.map((i) => i.key), ["d"]);

  const nss = await client.store.listNamespaces({ prefix: [user] });
  assert.deepEqual(nss.namespaces, [[user, "memories"], [user, "memories", "work"], [user, "settings"]]);
  const shallow = await client.store.listNamespaces({ prefix: [user], maxDepth: 2 });
  assert.deepEqual(shallow.namespaces, [[user, "memories"], [user, "settings"]]);
  const bySuffix = await client.store.listNamespaces({ prefix: [user], suffix: ["work"] });
  assert.deepEqual(bySuffix.namespaces, [[user, "memories", "work"]]);
  const wild = await client.store.listNamespaces({ prefix: [user, "*", "work"] });
  assert.deepEqual(wild.namespaces, [[user, "memories", "work"]]);
});

test("store refuses what it cannot do, legibly", async () => {
  await assert.rejects(client.store.searchItems(["x"], { query: "tea" }), refused(422, "vector index"));
  await assert.rejects(client.store.putItem(["x"], "k", { v: 1 }, { index: ["text"] }), refused(422, "vector index"));
  await assert.rejects(client.store.searchItems(["x"], { filter: { n: { $gt: 1 } } }), refused(422, "operators"));
  await assert.rejects(client.store.putItem(["x"], "big", { text: "x".repeat(70 << 10) }), (e) => e.status === 413);
  await assert.rejects(client.store.putItem([], "k", { v: 1 }), refused(422, "namespace"));
  await assert.rejects(client.store.putItem(["x"], "k", "not an object"), refused(422, "value"));
});
