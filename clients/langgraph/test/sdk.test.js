// @langchain/langgraph-sdk's Client, unmodified, against turnstile's LangGraph routes. Run by
// cmd/turnstile/integration (TestLangGraphSDK), which starts the stack and sets TURNSTILE_URL;
// by hand: TURNSTILE_URL=http://127.0.0.1:8080 npm test (with `make dev` running).
//
// The demo agent's knobs travel in run metadata: {demo: {tokens: N}} streams "w0 ", "w1 ", …
// "wN-1", so order, gaps and duplicates are visible in the chunks themselves.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.TURNSTILE_URL;
assert.ok(apiUrl, "TURNSTILE_URL must name the stack (set by the Go test)");
const apiKey = process.env.TURNSTILE_API_KEY || undefined;
const client = new Client({ apiUrl, apiKey });
// TURNSTILE_REGION, when the stack runs as a region: every ID it mints starts with "<region>-".
const region = process.env.TURNSTILE_REGION || "";
const minted = new RegExp(`^${region ? region + "-" : ""}[0-9a-f]{8}-[0-9a-f-]{27}$`);

const human = (content) => ({ messages: [{ type: "human", content }] });
const demo = (knobs) => ({ demo: knobs });
const words = (n) => Array.from({ length: n }, (_, i) => (i < n - 1 ? `w${i} ` : `w${i}`));
const lastAI = (values) => values.messages.filter((m) => m.type === "ai").at(-1);

// collect reads a run stream into its events; stopAfter(part, parts) true cuts it there.
async function collect(stream, stopAfter) {
  const parts = [];
  for await (const part of stream) {
    parts.push(part);
    if (stopAfter?.(part, parts)) break;
  }
  return parts;
}
const chunks = (parts) => parts.filter((p) => p.event === "messages").map((p) => p.data[0].content);

// waitStatus polls a run's status (the API's own answer) until it is one of want.
async function waitStatus(threadId, runId, want, timeoutMs = 20000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const run = await client.runs.get(threadId, runId);
    if (want.includes(run.status)) return run;
    if (Date.now() > until) assert.fail(`run ${runId} is ${run.status}, want ${want}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("a thread exists before any run, with its metadata", async () => {
  const created = await client.threads.create({ metadata: { owner: "ann" } });
  assert.match(created.thread_id, minted);
  const got = await client.threads.get(created.thread_id);
  assert.equal(got.thread_id, created.thread_id);
  assert.equal(got.metadata.owner, "ann");
  assert.equal(got.status, "idle");
  // A client-named thread, and if_exists.
  const id = crypto.randomUUID();
  await client.threads.create({ threadId: id });
  await assert.rejects(client.threads.create({ threadId: id }), (e) => e.status === 409);
  const again = await client.threads.create({ threadId: id, ifExists: "do_nothing" });
  assert.equal(again.thread_id, id);
  await assert.rejects(client.threads.get(crypto.randomUUID()), (e) => e.status === 404);
});

test("threads.delete: gone for good, refused while a run is in flight", async () => {
  const { thread_id } = await client.threads.create({ metadata: { owner: "del" } });
  await client.threads.delete(thread_id);
  await assert.rejects(client.threads.get(thread_id), (e) => e.status === 404);
  await assert.rejects(client.threads.delete(thread_id), (e) => e.status === 404);
  // A thread with a running run is not deleted (409) until the run ends.
  const busy = await client.threads.create();
  const run = await client.runs.create(busy.thread_id, "agent", { input: human("d"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(busy.thread_id, run.run_id, ["running"]);
  await assert.rejects(client.threads.delete(busy.thread_id), (e) => e.status === 409);
  assert.equal((await client.threads.get(busy.thread_id)).status, "busy");
  await client.runs.cancel(busy.thread_id, run.run_id, true);
  await client.threads.delete(busy.thread_id);
  await assert.rejects(client.threads.get(busy.thread_id), (e) => e.status === 404);
});

test("a streamed run: metadata first, message chunks in order, values and updates", async () => {
  const { thread_id } = await client.threads.create();
  let created;
  const parts = await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("hello"),
      streamMode: ["values", "messages-tuple", "updates"],
      metadata: demo({ tokens: 12 }),
      onRunCreated: (meta) => (created = meta),
    }),
  );
  assert.equal(parts[0].event, "metadata");
  assert.ok(created, "onRunCreated was called from Content-Location");
  assert.equal(parts[0].data.run_id, created.run_id);
  assert.equal(created.thread_id, thread_id);
  assert.deepEqual(chunks(parts), words(12));
  const ids = parts.filter((p) => p.id !== undefined).map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "event ids are unique");
  const updates = parts.filter((p) => p.event === "updates");
  assert.equal(updates.at(-1).data.agent.messages[0].content, words(12).join(""));
  const values = parts.filter((p) => p.event === "values");
  assert.equal(values[0].data.messages.at(-1).content, "hello");
  assert.equal(lastAI(values.at(-1).data).content, words(12).join(""));
  assert.equal(parts.at(-1).event, "end");
  assert.match(created.run_id, minted);
  const run = await client.runs.get(thread_id, created.run_id);
  assert.equal(run.status, "success");
  assert.equal(run.assistant_id, "agent");
  assert.deepEqual(run.metadata, demo({ tokens: 12 }));
});

test("cut the stream, joinStream with the last event id: no gap, no duplicate", async () => {
  const { thread_id } = await client.threads.create();
  const n = 40;
  const abort = new AbortController();
  let runId;
  const first = await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("long"),
      streamMode: ["messages-tuple", "values"],
      metadata: demo({ tokens: n, duration_ms: 2000 }),
      signal: abort.signal,
      onRunCreated: (m) => (runId = m.run_id),
    }),
    (_, ps) => chunks(ps).length === 10,
  );
  abort.abort();
  const lastEventId = first.at(-1).id;
  assert.ok(lastEventId, "events carry ids");
  const rest = await collect(client.runs.joinStream(thread_id, runId, { lastEventId, streamMode: ["messages-tuple", "values"] }));
  assert.deepEqual([...chunks(first), ...chunks(rest)], words(n));
  const ids = [...first, ...rest].filter((p) => p.id !== undefined).map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "no event twice");
  assert.equal(lastAI(rest.filter((p) => p.event === "values").at(-1).data).content, words(n).join(""));
  // A join from inside one native event's protocol events (values then end of the completion)
  // resumes with exactly what follows.
  const tail = rest.slice(-2);
  assert.deepEqual(tail.map((p) => p.event), ["values", "end"]);
  const beforeTail = rest.at(-3).id;
  const replay = await collect(client.runs.joinStream(thread_id, runId, { lastEventId: beforeTail, streamMode: ["messages-tuple", "values"] }));
  assert.deepEqual(replay.map((p) => p.event), ["values", "end"]);
  const midTail = tail[0].id;
  const afterValues = await collect(client.runs.joinStream(thread_id, runId, { lastEventId: midTail, streamMode: ["messages-tuple", "values"] }));
  assert.deepEqual(afterValues.map((p) => p.event), ["end"]);
});

test("a background run and runs.join", async () => {
  const { thread_id } = await client.threads.create();
  const run = await client.runs.create(thread_id, "agent", { input: human("bg"), metadata: demo({ tokens: 5 }) });
  assert.equal(run.status, "pending");
  assert.equal(run.thread_id, thread_id);
  const values = await client.runs.join(thread_id, run.run_id);
  assert.equal(lastAI(values).content, words(5).join(""));
  assert.equal((await client.runs.get(thread_id, run.run_id)).status, "success");
});

test("runs.wait answers the thread's values", async () => {
  const { thread_id } = await client.threads.create();
  const values = await client.runs.wait(thread_id, "agent", { input: human("w"), metadata: demo({ tokens: 3 }) });
  assert.equal(lastAI(values).content, words(3).join(""));
});

test("cancel interrupts a running run", async () => {
  const { thread_id } = await client.threads.create();
  const run = await client.runs.create(thread_id, "agent", { input: human("c"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(thread_id, run.run_id, ["running"]);
  await client.runs.cancel(thread_id, run.run_id, true);
  assert.equal((await client.runs.get(thread_id, run.run_id)).status, "interrupted");
});

test("double-texting: reject refuses, interrupt replaces the running run", async () => {
  const { thread_id } = await client.threads.create();
  const long = await client.runs.create(thread_id, "agent", { input: human("first"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(thread_id, long.run_id, ["running"]);
  await assert.rejects(
    client.runs.create(thread_id, "agent", { input: human("second"), multitaskStrategy: "reject" }),
    (e) => e.status === 409,
  );
  const parts = await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("third"),
      multitaskStrategy: "interrupt",
      streamMode: ["messages-tuple"],
      metadata: demo({ tokens: 4 }),
    }),
  );
  assert.deepEqual(chunks(parts), words(4));
  assert.equal((await client.runs.get(thread_id, long.run_id)).status, "interrupted");
  await assert.rejects(
    client.runs.create(thread_id, "agent", { input: human("x"), multitaskStrategy: "rollback" }),
    (e) => e.status === 422,
  );
});

test("state and history after two runs", async () => {
  const { thread_id } = await client.threads.create();
  await client.runs.wait(thread_id, "agent", { input: human("one"), metadata: demo({ tokens: 2 }) });
  await client.runs.wait(thread_id, "agent", { input: human("two"), metadata: demo({ tokens: 3 }) });
  const state = await client.threads.getState(thread_id);
  assert.deepEqual(
    state.values.messages.map((m) => [m.type, m.content]),
    [["human", "one"], ["ai", "w0 w1"], ["human", "two"], ["ai", "w0 w1 w2"]],
  );
  const history = await client.threads.getHistory(thread_id);
  assert.equal(history.length, 2);
  assert.equal(history[0].checkpoint.checkpoint_id, state.checkpoint.checkpoint_id);
  assert.equal(history[1].values.messages.length, 2);
  assert.equal(history[0].parent_checkpoint.checkpoint_id, history[1].checkpoint.checkpoint_id);
  const older = await client.threads.getHistory(thread_id, { before: history[0].checkpoint });
  assert.equal(older.length, 1);
  const thread = await client.threads.get(thread_id);
  assert.equal(thread.values.messages.length, 4);
});

test("a retried create with the same Idempotency-Key returns the same run", async () => {
  const { thread_id } = await client.threads.create();
  const key = crypto.randomUUID();
  const keyed = new Client({ apiUrl, apiKey, defaultHeaders: { "Idempotency-Key": key } });
  const payload = { input: human("once"), metadata: demo({ tokens: 2 }), multitaskStrategy: "enqueue" };
  const a = await keyed.runs.create(thread_id, "agent", payload);
  const b = await keyed.runs.create(thread_id, "agent", payload);
  assert.equal(b.run_id, a.run_id);
  await client.runs.join(thread_id, a.run_id);
  assert.equal((await client.runs.list(thread_id)).length, 1);
});

test("refusals: unknown assistant, unknown thread, unsupported stream mode", async () => {
  const { thread_id } = await client.threads.create();
  await assert.rejects(client.runs.create(thread_id, "nobody", { input: human("x") }), (e) => e.status === 404);
  await assert.rejects(client.runs.create(crypto.randomUUID(), "agent", { input: human("x") }), (e) => e.status === 404);
  await assert.rejects(
    client.runs.create(thread_id, "agent", { input: human("x"), streamMode: ["frames"] }),
    (e) => e.status === 422,
  );
  // if_not_exists=create makes the thread.
  const fresh = crypto.randomUUID();
  const values = await client.runs.wait(fresh, "agent", { input: human("new"), ifNotExists: "create", metadata: demo({ tokens: 1 }) });
  assert.equal(lastAI(values).content, "w0");
  assert.equal((await client.threads.get(fresh)).thread_id, fresh);
});

test("another region's thread or run is misdirected (421), naming its owner", { skip: !region && "single region" }, async () => {
  // The SDK retries a 421 with backoff like any status it does not know; once is enough here.
  const once = new Client({ apiUrl, apiKey, callerOptions: { maxRetries: 0 } });
  const other = "use1-" + crypto.randomUUID();
  for (const call of [() => once.threads.get(other), () => once.runs.get(other, other)]) {
    await assert.rejects(call(), (e) => {
      assert.equal(e.status, 421);
      assert.match(String(e.message), /use1/);
      return true;
    });
  }
  const { thread_id } = await client.threads.create();
  await assert.rejects(once.runs.get(thread_id, "use1-" + crypto.randomUUID()), (e) => e.status === 421);
});

test("threads.search: metadata, status and values filters, sort and paging, each with its values", async () => {
  const suite = crypto.randomUUID();
  const a = await client.threads.create({ metadata: { suite, n: 1 } });
  const b = await client.threads.create({ metadata: { suite, n: 2 } });
  const c = await client.threads.create({ metadata: { suite, n: 3 } });
  await client.runs.wait(b.thread_id, "agent", { input: human("searched"), metadata: demo({ tokens: 2 }) });
  const long = await client.runs.create(c.thread_id, "agent", { input: human("busy"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(c.thread_id, long.run_id, ["running"]);

  const all = await client.threads.search({ metadata: { suite }, limit: 10 });
  assert.deepEqual(all.map((t) => t.thread_id), [c, b, a].map((t) => t.thread_id), "newest first by default");
  const withRun = all.find((t) => t.thread_id === b.thread_id);
  assert.deepEqual(withRun.values.messages.map((m) => [m.type, m.content]), [["human", "searched"], ["ai", "w0 w1"]]);
  assert.deepEqual(all.find((t) => t.thread_id === a.thread_id).values, {});

  const asc = await client.threads.search({ metadata: { suite }, sortBy: "created_at", sortOrder: "asc", limit: 2, offset: 1 });
  assert.deepEqual(asc.map((t) => t.thread_id), [b.thread_id, c.thread_id]);
  const busy = await client.threads.search({ metadata: { suite }, status: "busy" });
  assert.deepEqual(busy.map((t) => t.thread_id), [c.thread_id]);
  const idle = await client.threads.search({ metadata: { suite }, status: "idle", sortBy: "thread_id", sortOrder: "asc" });
  assert.deepEqual(idle.map((t) => t.thread_id), [a.thread_id, b.thread_id].sort());
  const byValues = await client.threads.search({ metadata: { suite }, values: { messages: [{ content: "searched" }] } });
  assert.deepEqual(byValues.map((t) => t.thread_id), [b.thread_id]);
  const byIds = await client.threads.search({ ids: [a.thread_id] });
  assert.deepEqual(byIds.map((t) => t.thread_id), [a.thread_id]);
  assert.deepEqual(await client.threads.search({ metadata: { suite, n: 9 } }), []);
  await assert.rejects(client.threads.search({ sortBy: "color" }), (e) => e.status === 422);
  await client.runs.cancel(c.thread_id, long.run_id, true);
});

test("threads.update merges metadata", async () => {
  const { thread_id } = await client.threads.create({ metadata: { owner: "ann", topic: "x" } });
  const updated = await client.threads.update(thread_id, { metadata: { topic: "y", pinned: true } });
  assert.deepEqual(updated.metadata, { owner: "ann", topic: "y", pinned: true });
  assert.deepEqual((await client.threads.get(thread_id)).metadata, { owner: "ann", topic: "y", pinned: true });
  await assert.rejects(client.threads.update(crypto.randomUUID(), { metadata: { a: 1 } }), (e) => e.status === 404);
});

test("runs.delete: a finished run is gone from the thread's runs; a running one is refused", async () => {
  const { thread_id } = await client.threads.create();
  const run = await client.runs.create(thread_id, "agent", { input: human("del"), metadata: demo({ tokens: 2 }) });
  await client.runs.join(thread_id, run.run_id);
  await client.runs.delete(thread_id, run.run_id);
  await assert.rejects(client.runs.get(thread_id, run.run_id), (e) => e.status === 404);
  assert.deepEqual(await client.runs.list(thread_id), []);
  // The thread's state keeps what the run did, as on the Platform.
  assert.equal((await client.threads.getState(thread_id)).values.messages.length, 2);
  const long = await client.runs.create(thread_id, "agent", { input: human("l"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(thread_id, long.run_id, ["running"]);
  await assert.rejects(client.runs.delete(thread_id, long.run_id), (e) => e.status === 409);
  await client.runs.cancel(thread_id, long.run_id, true);
});

test("stateless runs: wait, stream and background on a throwaway thread", async () => {
  const values = await client.runs.wait(null, "agent", { input: human("once"), metadata: demo({ tokens: 3 }) });
  assert.deepEqual(values.messages.map((m) => m.content), ["once", "w0 w1 w2"]);
  let created;
  const parts = await collect(
    client.runs.stream(null, "agent", {
      input: human("s"), streamMode: ["messages-tuple", "values"], metadata: demo({ tokens: 4 }),
      onRunCreated: (m) => (created = m),
    }),
  );
  assert.deepEqual(chunks(parts), words(4));
  assert.equal(parts.at(-1).event, "end");
  assert.ok(created.thread_id, "the stream names its throwaway thread");
  // on_completion=delete (the default): the thread is gone once the run ended.
  await assert.rejects(client.threads.get(created.thread_id), (e) => e.status === 404);
  const bg = await client.runs.create(null, "agent", { input: human("bg"), metadata: demo({ tokens: 2 }) });
  assert.equal(bg.status, "pending");
  const until = Date.now() + 20000;
  for (;;) {
    try {
      await client.threads.get(bg.thread_id);
    } catch (e) {
      assert.equal(e.status, 404);
      break;
    }
    assert.ok(Date.now() < until, "the background run's thread was not deleted after its end");
    await new Promise((r) => setTimeout(r, 100));
  }
  const kept = await client.runs.wait(null, "agent", { input: human("k"), onCompletion: "keep", metadata: demo({ tokens: 1 }), onRunCreated: (m) => (created = m) });
  assert.equal(lastAI(kept).content, "w0");
  assert.equal((await client.threads.get(created.thread_id)).values.messages.length, 2, "on_completion=keep keeps the thread");
});

test("checkpoint: the thread's head is accepted, an older one refused as stale", async () => {
  const { thread_id } = await client.threads.create();
  await client.runs.wait(thread_id, "agent", { input: human("one"), metadata: demo({ tokens: 1 }) });
  const first = (await client.threads.getState(thread_id)).checkpoint;
  const values = await client.runs.wait(thread_id, "agent", { input: human("two"), checkpoint: first, metadata: demo({ tokens: 1 }) });
  assert.equal(values.messages.length, 4);
  await assert.rejects(
    client.runs.wait(thread_id, "agent", { input: human("three"), checkpoint: first }),
    (e) => e.status === 409 && /not the thread's latest/.test(String(e.message)),
  );
  const head = (await client.threads.getHistory(thread_id, { limit: 1 }))[0].checkpoint;
  const again = await client.runs.wait(thread_id, "agent", { input: human("three"), checkpointId: head.checkpoint_id, metadata: demo({ tokens: 1 }) });
  assert.equal(again.messages.length, 6);
});

test("cancel with action=rollback: the run and its input are gone from the thread", async () => {
  const { thread_id } = await client.threads.create();
  await client.runs.wait(thread_id, "agent", { input: human("kept"), metadata: demo({ tokens: 1 }) });
  const run = await client.runs.create(thread_id, "agent", { input: human("rolled back"), metadata: demo({ tokens: 50, duration_ms: 20000 }) });
  await waitStatus(thread_id, run.run_id, ["running"]);
  await client.runs.cancel(thread_id, run.run_id, true, "rollback");
  await assert.rejects(client.runs.get(thread_id, run.run_id), (e) => e.status === 404);
  assert.deepEqual((await client.runs.list(thread_id)).length, 1);
  const state = await client.threads.getState(thread_id);
  assert.deepEqual(state.values.messages.map((m) => m.content), ["kept", "w0"]);
  assert.equal((await client.threads.getHistory(thread_id)).length, 1);
  assert.equal((await client.threads.get(thread_id)).status, "idle");
});

test('onDisconnect: "cancel" cancels the run when the stream\'s client leaves', async () => {
  const { thread_id } = await client.threads.create();
  const abort = new AbortController();
  let runId;
  await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("leave"), streamMode: ["messages-tuple"], onDisconnect: "cancel",
      metadata: demo({ tokens: 50, duration_ms: 20000 }), signal: abort.signal,
      onRunCreated: (m) => (runId = m.run_id),
    }),
    (_, ps) => chunks(ps).length === 2,
  );
  abort.abort();
  const run = await waitStatus(thread_id, runId, ["interrupted", "success"]);
  assert.equal(run.status, "interrupted");
  // Without it (the default, continue) the run outlives its stream.
  const cont = new AbortController();
  let other;
  await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("stay"), streamMode: ["messages-tuple"], metadata: demo({ tokens: 4, duration_ms: 400 }), signal: cont.signal,
      onRunCreated: (m) => (other = m.run_id),
    }),
    (_, ps) => chunks(ps).length === 1,
  );
  cont.abort();
  assert.equal((await waitStatus(thread_id, other, ["interrupted", "success"])).status, "success");
});

test("threads.updateState: a human edits the thread, and the next run's agent sees the edit", async () => {
  const { thread_id } = await client.threads.create();
  await client.runs.wait(thread_id, "agent", { input: human("one"), metadata: demo({ tokens: 2 }) });
  const state = await client.threads.getState(thread_id);
  const answer = state.values.messages.find((m) => m.type === "ai");
  const updated = await client.threads.updateState(thread_id, {
    values: { messages: [{ type: "ai", id: answer.id, content: "edited answer" }, { type: "human", content: "added note" }] },
    checkpoint: state.checkpoint,
  });
  assert.ok(updated.checkpoint.checkpoint_id);
  const after = await client.threads.getState(thread_id);
  assert.equal(after.checkpoint.checkpoint_id, updated.checkpoint.checkpoint_id, "the edit is the thread's head");
  assert.deepEqual(after.values.messages.map((m) => m.content), ["one", "edited answer", "added note"]);
  // The next run answers from the edited history (the demo agent's recall knob repeats it).
  const values = await client.runs.wait(thread_id, "agent", { input: human("what did you see?"), metadata: demo({ recall: true }) });
  assert.equal(lastAI(values).content, "one | edited answer | added note");
  assert.deepEqual(values.messages.map((m) => m.content).slice(0, 4), ["one", "edited answer", "added note", "what did you see?"]);
  // The history starts at the edit: the run after it, then the edit itself.
  const history = await client.threads.getHistory(thread_id);
  assert.deepEqual(history.map((s) => s.metadata.source), ["loop", "update"]);
  assert.equal(history[0].parent_checkpoint.checkpoint_id, updated.checkpoint.checkpoint_id);
  // A stale checkpoint is refused; a remove message deletes.
  await assert.rejects(client.threads.updateState(thread_id, { values: { messages: [] }, checkpoint: state.checkpoint }), (e) => e.status === 409);
  await client.threads.updateState(thread_id, { values: { messages: [{ type: "remove", id: answer.id }] } });
  assert.ok(!(await client.threads.getState(thread_id)).values.messages.some((m) => m.id === answer.id));
  await assert.rejects(client.threads.updateState(thread_id, { values: { counter: 1 } }), (e) => e.status === 422);
});

test("threads.copy: a new thread with the metadata and state, going on apart", async () => {
  const { thread_id } = await client.threads.create({ metadata: { owner: "copy" } });
  await client.runs.wait(thread_id, "agent", { input: human("original"), metadata: demo({ tokens: 1 }) });
  const copy = await client.threads.copy(thread_id);
  assert.notEqual(copy.thread_id, thread_id);
  assert.equal(copy.metadata.owner, "copy");
  assert.deepEqual(copy.values.messages.map((m) => m.content), ["original", "w0"]);
  const values = await client.runs.wait(copy.thread_id, "agent", { input: human("in the copy"), metadata: demo({ recall: true }) });
  assert.equal(lastAI(values).content, "original | w0");
  assert.equal((await client.threads.getState(thread_id)).values.messages.length, 2, "the original is unchanged");
});

test("stream mode custom: the agent's own events, in order, resumed like the rest", async () => {
  const { thread_id } = await client.threads.create();
  let runId;
  const modes = ["messages-tuple", "custom"];
  const parts = await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("progress"), streamMode: modes, metadata: demo({ tokens: 4, custom: 3 }),
      onRunCreated: (m) => (runId = m.run_id),
    }),
  );
  const seq = parts.filter((p) => p.event === "custom" || p.event === "messages")
    .map((p) => (p.event === "custom" ? `c${p.data.step}/${p.data.of}` : p.data[0].content));
  assert.deepEqual(seq, ["c1/3", "w0 ", "c2/3", "w1 ", "c3/3", "w2 ", "w3"]);
  // A join from the second custom event's id replays exactly what followed it.
  const second = parts.find((p) => p.event === "custom" && p.data.step === 2);
  const rest = await collect(client.runs.joinStream(thread_id, runId, { lastEventId: second.id, streamMode: modes }));
  const restSeq = rest.filter((p) => p.event === "custom" || p.event === "messages")
    .map((p) => (p.event === "custom" ? `c${p.data.step}/${p.data.of}` : p.data[0].content));
  assert.deepEqual(restSeq, ["w1 ", "c3/3", "w2 ", "w3"]);
  // A mode turnstile does not render is refused one by one, naming the mode.
  for (const mode of ["messages", "frames"]) {
    await assert.rejects(
      client.runs.create(thread_id, "agent", { input: human("x"), streamMode: ["values", mode] }),
      (e) => e.status === 422 && e.message.includes(`mode \\"${mode}\\"`),
    );
  }
});

test("stream modes events, debug, tasks, checkpoints and tools, rendered from the run's events", async () => {
  const { thread_id } = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread_id, "agent", {
      input: human("what time is it"),
      streamMode: ["events", "debug", "tasks", "checkpoints", "tools"],
      metadata: demo({ tokens: 2, tool: true, custom: 1 }),
    }),
  );
  const by = (name) => parts.filter((p) => p.event === name).map((p) => p.data);
  assert.deepEqual(
    by("events").map((e) => `${e.event}:${e.name}`),
    ["on_chain_start:agent", "on_tool_start:clock", "on_tool_end:tools", "on_custom_event:progress",
      "on_chat_model_stream:agent", "on_chat_model_stream:agent", "on_chain_end:agent"],
  );
  assert.deepEqual(by("events").filter((e) => e.event === "on_chat_model_stream").map((e) => e.data.chunk.content), words(2));
  assert.deepEqual(by("debug").map((d) => d.type), ["task", "task_result", "checkpoint"]);
  const checkpoint = by("checkpoints")[0];
  assert.equal(checkpoint.values.messages.at(-1).content, "w0 w1");
  const state = await client.threads.getState(thread_id);
  assert.equal(checkpoint.config.configurable.checkpoint_id, state.checkpoint.checkpoint_id, "the streamed checkpoint is the thread's head");
  assert.deepEqual(by("tasks").map((t) => (t.result ? "result" : "task")), ["task", "result"]);
  assert.deepEqual(by("tools").map((t) => t.event), ["on_tool_start", "on_tool_end"]);
  assert.equal(by("tools")[0].name, "clock");
});

test("a run stamps its thread's graph_id and assistant_id, so a sidebar finds the thread by them", async () => {
  const { thread_id } = await client.threads.create({ metadata: { owner: "sidebar" } });
  assert.deepEqual((await client.threads.search({ metadata: { graph_id: "agent", owner: "sidebar" } })).map((t) => t.thread_id), []);
  await client.runs.wait(thread_id, "agent", { input: human("list me"), metadata: demo({ tokens: 1 }) });
  const thread = await client.threads.get(thread_id);
  assert.equal(thread.metadata.graph_id, "agent");
  assert.equal(thread.metadata.assistant_id, "agent");
  assert.equal(thread.metadata.owner, "sidebar", "the thread's own metadata stays");
  const found = await client.threads.search({ metadata: { graph_id: "agent", owner: "sidebar" }, limit: 100 });
  assert.deepEqual(found.map((t) => t.thread_id), [thread_id]);
  assert.deepEqual(found[0].values.messages.map((m) => m.content), ["list me", "w0"]);
});

test("/ok, /info, and a JSON body without its Content-Type, as a chat front end sends them", async () => {
  const headers = apiKey ? { "x-api-key": apiKey } : {};
  assert.deepEqual(await (await fetch(`${apiUrl}/ok`, { headers })).json(), { ok: true });
  const info = await fetch(`${apiUrl}/info`, { headers });
  assert.equal(info.status, 200);
  assert.equal((await info.json()).host.kind, "self-hosted");
  // A passthrough that forwards only x-* headers drops the label: bytes, no Content-Type.
  const unlabelled = await fetch(`${apiUrl}/threads`, {
    method: "POST", headers, body: new TextEncoder().encode(JSON.stringify({ metadata: { via: "passthrough" } })),
  });
  assert.equal(unlabelled.status, 200);
  assert.equal((await unlabelled.json()).metadata.via, "passthrough");
  const form = await fetch(`${apiUrl}/threads`, { method: "POST", headers: { ...headers, "content-type": "application/x-www-form-urlencoded" }, body: "a=1" });
  assert.equal(form.status, 415);
});

test("assistants are configuration: creating, changing or versioning one is refused legibly", async () => {
  const refused = (e) => e.status === 404 || e.status === 405;
  await assert.rejects(client.assistants.create({ graphId: "agent" }), refused);
  await assert.rejects(client.assistants.update("agent", { metadata: { a: 1 } }), refused);
  await assert.rejects(client.assistants.delete("agent"), refused);
  await assert.rejects(client.assistants.getVersions("agent"), refused);
  await assert.rejects(client.assistants.setLatest("agent", 2), refused);
  assert.equal((await client.assistants.get("agent")).assistant_id, "agent", "the assistant is unchanged");
});

test("assistants: search, get, getGraph and getSchemas answer from the agent catalog", async () => {
  const found = await client.assistants.search({ limit: 10 });
  const agent = found.find((a) => a.assistant_id === "agent");
  assert.ok(agent, "the configured assistant is listed");
  assert.equal(agent.graph_id, "agent");
  assert.equal(agent.metadata.agent, "agent", "described by the catalog's agent");
  assert.deepEqual(await client.assistants.search({ graphId: "no-such-graph" }), []);
  const got = await client.assistants.get("agent");
  assert.equal(got.assistant_id, "agent");
  const graph = await client.assistants.getGraph("agent");
  assert.deepEqual(graph.edges.map((e) => [e.source, e.target]), [["__start__", "agent"], ["agent", "__end__"]]);
  const schemas = await client.assistants.getSchemas("agent");
  assert.deepEqual(schemas.input_schema.required, ["messages"]);
  await assert.rejects(client.assistants.get("nobody"), (e) => e.status === 404);
  const info = await (await fetch(`${apiUrl}/info`)).json();
  assert.equal(info.flags.assistants, true);
});
