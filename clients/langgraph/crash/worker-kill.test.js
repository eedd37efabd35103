// A fault while the SDK streams a run: run by cmd/turnstile/integration, which names the thread
// (LG_THREAD_ID) and waits for this test to write LG_MARK_FILE (the first chunks have arrived).
// TestLangGraphWorkerKilledMidRun then kills the worker running the turn and starts another
// (LG_EXPECT_TAKEOVER=1): the stream, unbroken from the SDK's side, shows the takeover and the run's
// one completion. TestLangGraphStreamCutRejoins cuts the stream instead: the SDK rejoins by
// itself (Location, Last-Event-ID) and the run reads as one gap-free stream.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.TURNSTILE_URL, apiKey: process.env.TURNSTILE_API_KEY || undefined });
const threadId = process.env.LG_THREAD_ID;
const n = 60;
const words = Array.from({ length: n }, (_, i) => (i < n - 1 ? `w${i} ` : `w${i}`));

test("the run completes once and the stream shows it", async () => {
  assert.ok(threadId && process.env.LG_MARK_FILE, "LG_THREAD_ID and LG_MARK_FILE are set by the Go test");
  const parts = [];
  let runId;
  let marked = false;
  for await (const part of client.runs.stream(threadId, "agent", {
    input: { messages: [{ type: "human", content: "survive" }] },
    streamMode: ["values", "messages-tuple"],
    metadata: { demo: { tokens: n, duration_ms: 6000 } },
    onRunCreated: (m) => (runId = m.run_id),
  })) {
    parts.push(part);
    if (!marked && parts.filter((p) => p.event === "messages").length === 5) {
      marked = true;
      writeFileSync(process.env.LG_MARK_FILE, runId);
    }
  }
  assert.ok(marked, "chunks arrived before the kill");
  assert.equal(parts.at(-1).event, "end", "the stream ends with the run's completion");
  const byAttempt = new Map();
  for (const p of parts.filter((p) => p.event === "messages")) {
    const a = p.data[1].attempt;
    byAttempt.set(a, [...(byAttempt.get(a) ?? []), p.data[0].content]);
  }
  const attempts = [...byAttempt.keys()];
  if (process.env.LG_EXPECT_TAKEOVER === "1") {
    assert.ok(attempts.length >= 2, `the takeover's attempt streams too (attempts seen: ${attempts})`);
  } else {
    assert.deepEqual(attempts, [1], "one attempt");
  }
  const last = Math.max(...attempts);
  assert.deepEqual(byAttempt.get(last), words, "the last attempt streams the whole answer, in order, once");
  const ids = parts.filter((p) => p.id !== undefined).map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "no event twice");
  const values = parts.filter((p) => p.event === "values").at(-1).data;
  assert.deepEqual(values.messages.map((m) => [m.type, m.content]), [["human", "survive"], ["ai", words.join("")]]);
  const run = await client.runs.get(threadId, runId);
  assert.equal(run.status, "success");
  const state = await client.threads.getState(threadId);
  assert.equal(state.values.messages.filter((m) => m.type === "ai").length, 1, "the thread holds one answer");
});
