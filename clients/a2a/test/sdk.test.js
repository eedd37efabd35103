// @a2a-js/sdk 1.x, unmodified, with its default protocol (1.0) against turnstile's A2A door, over
// the binding A2A_TRANSPORT names (JSONRPC or HTTP+JSON). Every answer and every stream event is
// also checked on the wire: the 1.0 shapes (no `kind`, TASK_STATE_/ROLE_ enums, one-of parts).
// Run by cmd/turnstile/integration (TestA2AV1SDK) with TURNSTILE_URL, TURNSTILE_KEY, PUSH_URL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Message, TaskState } from '@a2a-js/sdk';
import { TaskNotFoundError, TaskNotCancelableError, UnsupportedOperationError } from '@a2a-js/sdk/errors';

const base = process.env.TURNSTILE_URL;
const key = process.env.TURNSTILE_KEY;
const transport = process.env.A2A_TRANSPORT;
const pushURL = process.env.PUSH_URL;
assert.ok(base && key && transport && pushURL, 'TURNSTILE_URL, TURNSTILE_KEY, A2A_TRANSPORT, PUSH_URL');

// Every answer body the client read, as text, with the A2A-Version the request carried.
const wire = [];
async function keyedFetch(url, init = {}) {
  const headers = new Headers(init.headers);
  headers.set('Authorization', 'Bearer ' + key);
  const res = await fetch(url, { ...init, headers });
  wire.push({ url: String(url), version: headers.get('A2A-Version'), body: res.clone().text().catch(() => '') });
  return res;
}

const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: keyedFetch }), new RestTransportFactory({ fetchImpl: keyedFetch })],
  preferredTransports: [transport],
}));
const client = await factory.createFromUrl(base);

let n = 0;
function msg(text, demo, extra = {}) {
  return Message.fromJSON({
    messageId: `js-${transport}-${process.pid}-${Date.now()}-${n++}`, role: 'ROLE_USER', parts: [{ text }],
    metadata: demo ? { demo } : undefined, ...extra,
  });
}

function textOf(task) {
  return (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
}

// checkShape walks a 1.0 JSON value: no 0.3 `kind`, enums by their 1.0 names, parts one of four.
function checkShape(v, where) {
  if (Array.isArray(v)) return v.forEach((x, i) => checkShape(x, `${where}[${i}]`));
  if (!v || typeof v !== 'object') return;
  assert.ok(!('kind' in v), `${where}: a 0.3 kind member: ${JSON.stringify(v)}`);
  if (typeof v.state === 'string') assert.match(v.state, /^TASK_STATE_[A-Z_]+$/, `${where}.state`);
  if ('role' in v) assert.match(v.role, /^ROLE_(USER|AGENT)$/, `${where}.role`);
  if (Array.isArray(v.parts)) {
    for (const p of v.parts) {
      const has = ['text', 'raw', 'url', 'data'].filter((k) => k in p);
      assert.equal(has.length, 1, `${where}: a part has one of text, raw, url, data: ${JSON.stringify(p)}`);
    }
  }
  for (const [k, x] of Object.entries(v)) if (k !== 'metadata') checkShape(x, `${where}.${k}`);
}

// checkStreamEvent checks one event of a stream as sent: exactly one of the StreamResponse members.
function checkStreamEvent(ev, where) {
  const members = ['task', 'message', 'statusUpdate', 'artifactUpdate'].filter((k) => k in ev);
  assert.equal(members.length, 1, `${where}: one StreamResponse member: ${JSON.stringify(ev)}`);
  checkShape(ev, where);
}

// checkWire checks every answer read since mark: plain JSON answers and each SSE event.
async function checkWire(mark) {
  const seen = wire.slice(mark);
  assert.ok(seen.length > 0, 'the client made requests');
  for (const { url, version, body } of seen) {
    assert.equal(version, '1.0', `${url}: the request named A2A-Version 1.0`);
    const text = await body;
    if (!text.trim()) continue;
    const payloads = text.startsWith('data:') || text.startsWith('id:') || text.startsWith(':') || text.startsWith('event:')
      ? text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
      : [JSON.parse(text)];
    const stream = !(text.startsWith('{'));
    for (const p of payloads) {
      const v = transport === 'JSONRPC' ? (p.result ?? p.error) : p;
      assert.ok(v !== undefined, `${url}: a JSON-RPC answer has result or error`);
      if (stream && !p.error && !v.error) checkStreamEvent(v, url);
      else checkShape(v, url);
    }
  }
}

async function collect(stream, stop) {
  const evs = [];
  for await (const ev of stream) {
    evs.push(ev);
    if (stop && stop(evs)) break;
  }
  return evs;
}

// untilEnd follows a task to its end: its subscription runs out, or it is refused as the task
// already ended (UnsupportedOperationError, as 1.0 says for a terminal task).
async function untilEnd(id) {
  try {
    await collect(client.resubscribeTask({ id }));
  } catch (e) {
    assert.ok(e instanceof UnsupportedOperationError, String(e));
  }
}

test('card names both bindings of 1.0 and the client chose ' + transport, async () => {
  const card = await client.getAgentCard();
  assert.equal(card.name, 'turnstile-test');
  const ifaces = card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`);
  assert.ok(ifaces.includes('JSONRPC 1.0') && ifaces.includes('HTTP+JSON 1.0'), ifaces.join(', '));
  assert.equal(client.protocolVersion, '1.0');
  assert.equal(client.transport.protocolName ?? client.transport.base?.protocolName, transport);
  assert.ok(card.capabilities.streaming && card.capabilities.pushNotifications);
});

test('send, blocking: the completed task', async () => {
  const mark = wire.length;
  const res = await client.sendMessage({ message: msg('hello blocking', { tokens: 3 }) });
  assert.equal(res.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.ok(textOf(res).length > 0);
  assert.ok(res.history.length >= 1);
  await checkWire(mark);
});

test('send, not blocking, then subscribe to its end and get it', async () => {
  const mark = wire.length;
  const res = await client.sendMessage({ message: msg('hello later', { tokens: 5, duration_ms: 300 }), configuration: { returnImmediately: true } });
  assert.ok([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(res.status.state), `state ${res.status.state}`);
  await untilEnd(res.id);
  const got = await client.getTask({ id: res.id });
  assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
  const short = await client.getTask({ id: res.id, historyLength: 1 });
  assert.equal(short.history.length, 1);
  await checkWire(mark);
});

test('stream to completion: every event 1.0, the text the task keeps', async () => {
  const mark = wire.length;
  const evs = await collect(client.sendMessageStream({ message: msg('hello stream', { tokens: 8 }) }));
  const kinds = evs.map((e) => e.payload?.$case ?? e.$case);
  assert.equal(kinds[0], 'task', kinds.join(','));
  assert.ok(kinds.includes('artifactUpdate'), kinds.join(','));
  const last = evs.at(-1).payload.value;
  assert.equal(kinds.at(-1), 'statusUpdate');
  assert.equal(last.status.state, TaskState.TASK_STATE_COMPLETED);
  let text = '';
  for (const e of evs) {
    if (e.payload.$case !== 'artifactUpdate') continue;
    if (!e.payload.value.append) text = '';
    for (const p of e.payload.value.artifact.parts) text += p.content.value;
  }
  const task = await client.getTask({ id: last.taskId });
  assert.equal(textOf(task), text);
  await checkWire(mark);
});

test('subscribe after a cut: the rest of the task to its end', async () => {
  const mark = wire.length;
  const ac = new AbortController();
  const head = [];
  try {
    for await (const ev of client.sendMessageStream({ message: msg('cut me', { tokens: 30, duration_ms: 1500 }) }, { signal: ac.signal })) {
      head.push(ev);
      if (ev.payload.$case === 'artifactUpdate') ac.abort();
    }
  } catch (e) {
    assert.equal(e.name, 'AbortError', String(e));
  }
  const id = head[0].payload.value.id;
  const rest = await collect(client.resubscribeTask({ id }));
  assert.equal(rest[0].payload.$case, 'task', 'a subscription opens with the task');
  const last = rest.at(-1).payload.value;
  assert.equal(last.status.state, TaskState.TASK_STATE_COMPLETED);
  await checkWire(mark);
});

test('cancel a working task; a finished one is not cancelable', async () => {
  const mark = wire.length;
  const res = await client.sendMessage({ message: msg('cancel me', { tokens: 40, duration_ms: 20000 }), configuration: { returnImmediately: true } });
  // Wait on the stream for the turn to start working, then cancel it.
  await collect(client.resubscribeTask({ id: res.id }), (evs) => evs.some((e) => e.payload.$case === 'statusUpdate' || e.payload.$case === 'artifactUpdate'));
  const canceled = await client.cancelTask({ id: res.id });
  assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED);
  await assert.rejects(client.cancelTask({ id: res.id }), (e) => e instanceof TaskNotCancelableError);
  await checkWire(mark);
});

test('input-required, then the follow-up completes the same task', async () => {
  const mark = wire.length;
  const first = await client.sendMessage({ message: msg('ask me', { end_state: 'input-required', tokens: 3 }) });
  assert.equal(first.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const next = await client.sendMessage({ message: msg('here you go', { tokens: 2 }, { taskId: first.id, contextId: first.contextId }) });
  assert.equal(next.id, first.id);
  assert.equal(next.status.state, TaskState.TASK_STATE_COMPLETED);
  const got = await client.getTask({ id: first.id });
  assert.equal(got.history.filter((m) => m.role === 1).length, 2, 'both user messages');
  await checkWire(mark);
});

test('list a context\'s tasks with filters and pages', async () => {
  const mark = wire.length;
  const contextId = `ctx-${transport.replace(/\W/g, '')}-${process.pid}-${Date.now()}`;
  const done = await client.sendMessage({ message: msg('one', { tokens: 2 }, { contextId }) });
  const asks = await client.sendMessage({ message: msg('two', { end_state: 'input-required', tokens: 2 }, { contextId }) });
  const all = await client.listTasks({ contextId });
  assert.deepEqual(all.tasks.map((t) => t.id).sort(), [done.id, asks.id].sort());
  assert.ok(all.tasks.every((t) => t.artifacts.length === 0), 'artifacts only when asked');
  const completed = await client.listTasks({ contextId, status: TaskState.TASK_STATE_COMPLETED, includeArtifacts: true });
  assert.deepEqual(completed.tasks.map((t) => t.id), [done.id]);
  assert.ok(textOf(completed.tasks[0]).length > 0);
  const waiting = await client.listTasks({ contextId, status: TaskState.TASK_STATE_INPUT_REQUIRED, historyLength: 0 });
  assert.deepEqual(waiting.tasks.map((t) => t.id), [asks.id]);
  assert.equal(waiting.tasks[0].history.length, 0);
  const page1 = await client.listTasks({ contextId, pageSize: 1 });
  assert.equal(page1.tasks.length, 1);
  assert.ok(page1.nextPageToken, 'a next page');
  const page2 = await client.listTasks({ contextId, pageSize: 1, pageToken: page1.nextPageToken });
  assert.deepEqual([...page1.tasks, ...page2.tasks].map((t) => t.id).sort(), [done.id, asks.id].sort());
  await checkWire(mark);
});

test('a task that does not exist, in any shape of ID', async () => {
  for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
    await assert.rejects(client.getTask({ id }), (e) => e instanceof TaskNotFoundError, id);
  }
});

test('push configs: create, get, list, delete; then a delivery', async () => {
  const mark = wire.length;
  const task = await client.sendMessage({ message: msg('configs', { tokens: 2 }), configuration: { returnImmediately: true } });
  const path = '/js-' + transport.replace(/\W/g, '').toLowerCase();
  const made = await client.createTaskPushNotificationConfig({ taskId: task.id, id: 'cfg-js', url: pushURL + path + '-crud', token: 'tok-js' });
  assert.equal(made.id, 'cfg-js');
  assert.equal(made.taskId, task.id);
  const got = await client.getTaskPushNotificationConfig({ taskId: task.id, id: 'cfg-js' });
  assert.equal(got.url, pushURL + path + '-crud');
  const list = await client.listTaskPushNotificationConfig({ taskId: task.id });
  assert.deepEqual(list.configs.map((c) => c.id), ['cfg-js']);
  await client.deleteTaskPushNotificationConfig({ taskId: task.id, id: 'cfg-js' });
  await assert.rejects(client.getTaskPushNotificationConfig({ taskId: task.id, id: 'cfg-js' }), (e) => e instanceof TaskNotFoundError);

  // A delivery: a config on a running task; the test in Go waits for its signed POSTs.
  const long = await client.sendMessage({ message: msg('push me', { tokens: 6, duration_ms: 600 }), configuration: { returnImmediately: true } });
  await client.createTaskPushNotificationConfig({ taskId: long.id, url: pushURL + path, token: 'tok-deliver' });
  console.log(`PUSH ${path} ${long.id}`);
  await untilEnd(long.id);
  await checkWire(mark);
});
