// Drives the aisdk role's routes with the ai package's own DefaultChatTransport and
// readUIMessageStream, unmodified, against a running stack at TURNSTILE_URL (the Go test
// TestAISDKNode in cmd/turnstile/integration starts one and runs this file).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const base = process.env.TURNSTILE_URL;
if (!base) throw new Error('TURNSTILE_URL is not set: run this through the Go test TestAISDKNode');

// A slow answer, so a test can leave in the middle: 24 words over 2.4 s.
const slow = { demo: { tokens: 24, duration_ms: 2400 } };

function userMessage(text) {
  return { id: randomUUID(), role: 'user', parts: [{ type: 'text', text }] };
}

// recordingFetch is the transport's documented fetch option: it passes the response through as it
// came and remembers each part's SSE id, in order, so a test can name the part it stopped after.
function recordingFetch(ids) {
  return async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body) return res;
    const decoder = new TextDecoder();
    let pending = '';
    const tap = new TransformStream({
      transform(chunk, ctl) {
        pending += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = pending.indexOf('\n\n')) >= 0) {
          const event = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          const id = /^id: (.*)$/m.exec(event)?.[1];
          if (/^data: /m.test(event) && !/^data: \[DONE\]$/m.test(event)) ids.push(id);
        }
        ctl.enqueue(chunk);
      },
    });
    return new Response(res.body.pipeThrough(tap), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// firstChunks passes the first n chunks of a UI message chunk stream and cancels the rest: a
// client that goes away in the middle of an answer.
function firstChunks(stream, n) {
  const reader = stream.getReader();
  let seen = 0;
  return new ReadableStream({
    async pull(ctl) {
      if (seen === n) {
        await reader.cancel();
        ctl.close();
        return;
      }
      const { value, done } = await reader.read();
      if (done) {
        ctl.close();
        return;
      }
      seen++;
      ctl.enqueue(value);
    },
  });
}

// lastMessage reads a chunk stream into the message readUIMessageStream builds.
async function lastMessage(stream, message) {
  let last;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return last;
}

const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

async function turnOutput(turnId) {
  const res = await fetch(`${base}/v1/turns/${turnId}`);
  assert.equal(res.status, 200);
  const turn = await res.json();
  assert.equal(turn.status, 'succeeded');
  return turn.output.text;
}

test('a streamed answer is a message equal to the turn output', async () => {
  const transport = new DefaultChatTransport({ api: `${base}/v1/chat` });
  const chatId = 'node-' + randomUUID();
  const stream = await transport.sendMessages({
    chatId, messages: [userMessage('hello from node')], trigger: 'submit-message',
    messageId: undefined, abortSignal: undefined,
  });
  const msg = await lastMessage(stream);
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.metadata.turn_id, msg.id, 'the assistant message is named by its turn');
  assert.equal(textOf(msg), await turnOutput(msg.id));
  assert.match(textOf(msg), /You said "hello from node"/);

  // The turn is over: the resume route says so with 204, which the transport reads as null.
  assert.equal(await transport.reconnectToStream({ chatId }), null);

  // The chat's messages seed a reloaded useChat: the user's message, then the answer.
  const res = await fetch(`${base}/v1/chat/${chatId}/messages`);
  const history = await res.json();
  assert.deepEqual(history.map((m) => [m.role, textOf(m)]), [['user', 'hello from node'], ['assistant', textOf(msg)]]);
  assert.equal(history[1].id, msg.id);
});

test('a tool call and its result arrive as tool parts', async () => {
  const transport = new DefaultChatTransport({ api: `${base}/v1/chat`, body: { metadata: { demo: { tool: true } } } });
  const stream = await transport.sendMessages({
    chatId: 'node-' + randomUUID(), messages: [userMessage('use a tool')], trigger: 'submit-message',
  });
  const msg = await lastMessage(stream);
  const tools = msg.parts.filter((p) => p.type === 'dynamic-tool');
  assert.equal(tools.length, 1, JSON.stringify(msg.parts));
  assert.equal(tools[0].state, 'output-available');
  assert.equal(textOf(msg), await turnOutput(msg.id));
});

test('a resume mid-answer without Last-Event-ID replays the turn once', async () => {
  const transport = new DefaultChatTransport({ api: `${base}/v1/chat`, body: { metadata: slow } });
  const chatId = 'node-' + randomUUID();
  const first = await transport.sendMessages({ chatId, messages: [userMessage('resume me')], trigger: 'submit-message' });
  const partial = await lastMessage(firstChunks(first, 6));
  assert.ok(textOf(partial).length > 0, 'the client left after some text');

  const resumed = await transport.reconnectToStream({ chatId });
  assert.notEqual(resumed, null, 'the turn is still active');
  const msg = await lastMessage(resumed);
  assert.equal(msg.id, partial.id);
  assert.equal(textOf(msg), await turnOutput(msg.id));
  assert.equal(textOf(msg).split(' ').length, 24);
});

test('a resume mid-answer with Last-Event-ID returns the rest exactly once', async () => {
  const ids = [];
  const transport = new DefaultChatTransport({ api: `${base}/v1/chat`, body: { metadata: slow }, fetch: recordingFetch(ids) });
  const chatId = 'node-' + randomUUID();
  const first = await transport.sendMessages({ chatId, messages: [userMessage('resume me exactly')], trigger: 'submit-message' });
  const n = 8;
  const partial = await lastMessage(firstChunks(first, n));
  const lastEventId = ids[n - 1];
  assert.match(lastEventId, /^[^:]+:\d+-\d+$/, 'parts carry the native event id');

  const resumeIds = [];
  const resumer = new DefaultChatTransport({
    api: `${base}/v1/chat`,
    fetch: recordingFetch(resumeIds),
    prepareReconnectToStreamRequest: ({ api, id, headers }) => ({
      api: `${api}/${id}/stream`, headers: { ...headers, 'Last-Event-ID': lastEventId },
    }),
  });
  const rest = await resumer.reconnectToStream({ chatId });
  const msg = await lastMessage(rest, partial);
  assert.equal(textOf(msg), await turnOutput(msg.id), 'the parts before the cursor and after it make the answer once');
  assert.ok(!resumeIds.includes(lastEventId), 'nothing at or before the cursor is sent again');
});

test('admission and double-texting are refused before the stream, as the native API', async () => {
  const transport = new DefaultChatTransport({ api: `${base}/v1/chat`, body: { metadata: slow } });
  const chatId = 'node-' + randomUUID();
  const first = await transport.sendMessages({ chatId, messages: [userMessage('one')], trigger: 'submit-message' });
  const rejecting = new DefaultChatTransport({ api: `${base}/v1/chat`, body: { multitask: 'reject' } });
  await assert.rejects(
    rejecting.sendMessages({ chatId, messages: [userMessage('two')], trigger: 'submit-message' }),
    /session-busy/,
  );
  await lastMessage(first);

  const bad = await fetch(`${base}/v1/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: chatId, messages: [{ id: 'a', role: 'assistant', parts: [] }] }),
  });
  assert.equal(bad.status, 422);
  assert.equal(bad.headers.get('content-type'), 'application/problem+json');
});
