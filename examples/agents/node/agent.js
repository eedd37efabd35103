// A minimal turnstile http agent, written from docs/http-agent-protocol.md alone, with no
// dependencies. It asks for a city, looks the weather up with a (pretend) tool, and answers.
//
//   node agent.js [port]     # prints "listening on http://127.0.0.1:<port>"
//   TURNSTILE_AGENT=http TURNSTILE_HTTP_AGENT_URL=http://127.0.0.1:<port> make dev
'use strict';
const http = require('node:http');

const QUESTION = 'Which city?';

function weather(city) {
  // A real tool would call a service here, passing the call's idempotency key along.
  return { city, forecast: 'sunny' };
}

function answer(turn, send) {
  const last = turn.history[turn.history.length - 1];
  if (!last || last.role !== 'assistant' || last.content !== QUESTION) {
    // Not an answer to our question: ask it. The turn ends waiting for the user.
    send({ type: 'usage', input_tokens: turn.text.length, output_tokens: 2, model: 'example' });
    send({ type: 'delta', text: QUESTION });
    send({ type: 'input_required' });
    return;
  }
  const city = turn.text.trim();
  const callId = 'weather-1';
  // A retried attempt lists what earlier attempts published: reuse a result instead of calling again.
  const prior = (turn.prior || []).find((p) => p.type === 'turn.tool_result' && p.data.call_id === callId);
  send({ type: 'tool_call', call_id: callId, name: 'weather', arguments: { city } });
  const result = prior ? prior.data.result : weather(city);
  send({ type: 'tool_result', call_id: callId, result });
  send({ type: 'delta', text: `It is ${result.forecast} ` });
  send({ type: 'delta', text: `in ${city}.` });
  send({ type: 'usage', input_tokens: turn.text.length, output_tokens: 6, model: 'example' });
  send({ type: 'done' });
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') {
    res.writeHead(405).end();
    return;
  }
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    let turn;
    try {
      turn = JSON.parse(body);
    } catch {
      res.writeHead(400).end('bad JSON'); // a 4xx fails the turn at once
      return;
    }
    // NDJSON: one event per line. Node sends each write at once (chunked encoding).
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
    try {
      answer(turn, (event) => res.write(JSON.stringify(event) + '\n'));
    } catch (err) {
      res.write(JSON.stringify({ type: 'error', message: String(err), retryable: true }) + '\n');
    }
    res.end();
  });
});

server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => server.close());
