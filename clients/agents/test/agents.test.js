// Two agents of one installation, as `make dev-agents` runs them (examples/agents-dev.yaml):
// support (the demo adapter) and research (the openai adapter against the load generator's fake
// model), each reached through every front door with its official client, unmodified: the native
// API, @a2a-js/sdk, @langchain/langgraph-sdk and the ai package's DefaultChatTransport.
//
// Run by cmd/turnstile/integration (TestTwoAgentDevInstallation), which runs scripts/dev-agents.sh
// and sets TURNSTILE_URL; by hand, with `make dev-agents` running:
//   cd clients/agents && npm ci && TURNSTILE_URL=http://127.0.0.1:8080 npm test
//
// A research reply must be the fake model's answer, its tokens "<index>@<unix ns> " in order
// (loadtest/internal/fakechat; FAKE_MODEL_TOKENS of them, the script's -turn-tokens): nothing else
// writes that, so it shows the turn went through the openai adapter to the fake. A support reply
// must be the demo agent's echo of what was asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Message, TaskState } from '@a2a-js/sdk';
import { Client } from '@langchain/langgraph-sdk';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const base = process.env.TURNSTILE_URL;
assert.ok(base, 'TURNSTILE_URL must name the installation (make dev-agents, or the Go test)');
const fakeTokens = Number(process.env.FAKE_MODEL_TOKENS || 8);

const agents = ['support', 'research'];

// checkReply asserts text is what agent answers to question.
function checkReply(agent, question, text) {
  if (agent === 'support') {
    assert.match(text, new RegExp(`^You said "${question}"\\. This reply comes from the turnstile demo agent\\.`), `support's reply: ${text}`);
    return;
  }
  const words = text.trim().split(/\s+/);
  assert.equal(words.length, fakeTokens, `research's reply has the fake model's ${fakeTokens} tokens: ${text}`);
  words.forEach((w, i) => assert.match(w, new RegExp(`^${i}@\\d{16,}$`), `research's token ${i} is the fake model's: ${text}`));
}

// sseEvents reads a text/event-stream response to its end into [{event, data}].
async function sseEvents(res) {
  const out = [];
  const text = await res.text();
  for (const block of text.split('\n\n')) {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if (event && data) out.push({ event, data: JSON.parse(data) });
  }
  return out;
}

test('native API: the catalog lists both, and a turn on each streams to its outcome', async () => {
  const catalog = await (await fetch(`${base}/v1/agents`)).json();
  assert.equal(catalog.default, 'support');
  assert.deepEqual(catalog.agents.map((a) => [a.name, a.adapter]), [['research', 'openai'], ['support', 'demo']]);

  for (const agent of agents) {
    const session = `native-${agent}-${randomUUID()}`;
    const question = `native question for ${agent}`;
    const res = await fetch(`${base}/v1/sessions/${session}/turns`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ input: { text: question }, agent }),
    });
    assert.equal(res.status, 202, await res.clone().text());
    const accepted = await res.json();
    // The stream of one turn closes at its terminal event.
    const stream = await fetch(base + accepted.stream_url, { headers: { Authorization: `Bearer ${accepted.stream_token}` } });
    assert.equal(stream.status, 200);
    const events = await sseEvents(stream);
    const last = events.at(-1);
    assert.equal(last.event, 'turn.completed', JSON.stringify(events));
    const deltas = events.filter((e) => e.event === 'turn.delta').map((e) => e.data.text).join('');
    assert.equal(deltas, last.data.output.text, 'the deltas make the output');
    checkReply(agent, question, last.data.output.text);

    const turn = await (await fetch(`${base}/v1/turns/${accepted.turn_id}`)).json();
    assert.equal(turn.status, 'succeeded');
    assert.equal(turn.output.text, last.data.output.text);
  }

  const unknown = await fetch(`${base}/v1/sessions/native-x/turns`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ input: { text: 'hi' }, agent: 'nobody' }),
  });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.headers.get('content-type'), 'application/problem+json');
});

test('A2A: @a2a-js/sdk resolves both cards, and a task on each completes', async () => {
  const factory = new ClientFactory();
  for (const [agent, name] of [['support', 'Support'], ['research', 'Research']]) {
    // The SDK resolves the card path (.well-known/agent-card.json) against the URL given, as a
    // relative URL: the endpoint's trailing slash keeps the agent's segment.
    const client = await factory.createFromUrl(`${base}/a2a/${agent}/`);
    const card = await client.getAgentCard();
    assert.equal(card.name, name, `${agent}'s card`);
    assert.ok(card.supportedInterfaces.some((i) => i.url === `${base}/a2a/${agent}` && i.protocolBinding === 'JSONRPC'),
      JSON.stringify(card.supportedInterfaces));
    const question = `a2a question for ${agent}`;
    const task = await client.sendMessage({
      message: Message.fromJSON({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: question }] }),
    });
    assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, `${agent}'s task`);
    const text = (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    checkReply(agent, question, text);
  }
});

test('LangGraph: assistants.search lists both, and a run on each answers', async () => {
  const client = new Client({ apiUrl: base });
  const found = await client.assistants.search({ limit: 100 });
  for (const agent of agents) {
    const a = found.find((x) => x.assistant_id === agent);
    assert.ok(a, `assistants.search lists ${agent}: ${JSON.stringify(found.map((x) => x.assistant_id))}`);
    assert.equal(a.graph_id, agent);
    assert.equal(a.metadata.agent, agent);
    assert.equal(a.metadata.team, agent, 'the catalog\'s assistant metadata');
  }
  for (const agent of agents) {
    const { thread_id } = await client.threads.create();
    const question = `langgraph question for ${agent}`;
    const values = await client.runs.wait(thread_id, agent, { input: { messages: [{ type: 'human', content: question }] } });
    const reply = values.messages.filter((m) => m.type === 'ai').at(-1);
    assert.ok(reply, JSON.stringify(values));
    checkReply(agent, question, reply.content);
  }
});

test('AI SDK: DefaultChatTransport chats with each agent on /v1/agents/{name}/chat', async () => {
  for (const agent of agents) {
    const transport = new DefaultChatTransport({ api: `${base}/v1/agents/${agent}/chat` });
    const question = `chat question for ${agent}`;
    const stream = await transport.sendMessages({
      chatId: `chat-${agent}-${randomUUID()}`, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [{ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: question }] }],
    });
    let last;
    for await (const m of readUIMessageStream({ stream, terminateOnError: true })) last = m;
    assert.equal(last.role, 'assistant');
    const text = last.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
    checkReply(agent, question, text);
    const turn = await (await fetch(`${base}/v1/turns/${last.metadata.turn_id}`)).json();
    assert.equal(turn.status, 'succeeded');
    assert.equal(turn.output.text, text, 'the message is the turn\'s output');
  }
});
