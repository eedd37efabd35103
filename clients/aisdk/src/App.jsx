import { useEffect, useMemo, useState } from 'react';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';

// The chat ID lives in the address (?chat=…), so a reload finds the same session; ?metadata=<json>
// is sent as the turn's metadata (the demo agent's knobs, e.g. {"demo":{"duration_ms":4000}}).
function chatFromLocation() {
  const url = new URL(window.location.href);
  let id = url.searchParams.get('chat');
  if (!id) {
    id = 'chat-' + crypto.randomUUID();
    url.searchParams.set('chat', id);
    window.history.replaceState(null, '', url);
  }
  let metadata;
  try {
    metadata = JSON.parse(url.searchParams.get('metadata') ?? 'null') ?? undefined;
  } catch {
    metadata = undefined;
  }
  return { id, metadata };
}

export function App() {
  const { id, metadata } = useMemo(chatFromLocation, []);
  const [history, setHistory] = useState(null);
  const [loadError, setLoadError] = useState(null);

  useEffect(() => {
    const ctl = new AbortController();
    fetch(`/v1/chat/${encodeURIComponent(id)}/messages`, { signal: ctl.signal })
      .then(async (res) => {
        if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
        setHistory(await res.json());
      })
      .catch((err) => {
        if (err.name !== 'AbortError') setLoadError(String(err));
      });
    return () => ctl.abort();
  }, [id]);

  return (
    <>
      <header>
        <h1>turnstile · useChat</h1>
        <span id="chat-id">{id}</span>
      </header>
      {loadError && <p className="error" id="load-error">{loadError}</p>}
      {history && <Chat id={id} initialMessages={history} metadata={metadata} />}
    </>
  );
}

function Chat({ id, initialMessages, metadata }) {
  const transport = useMemo(
    () => new DefaultChatTransport({ api: '/v1/chat', body: metadata ? { metadata } : undefined }),
    [metadata],
  );
  const { messages, sendMessage, status, error } = useChat({
    id,
    messages: initialMessages,
    transport,
    resume: true,
  });
  const [input, setInput] = useState('');

  const submit = (e) => {
    e.preventDefault();
    const text = input.trim();
    if (!text) return;
    sendMessage({ text });
    setInput('');
  };

  return (
    <>
      <main id="messages" data-status={status}>
        {messages.map((m) => (
          <div key={m.id} className={`msg ${m.role}`} data-role={m.role} data-id={m.id}>
            {m.parts.map((p, i) => <MessagePart key={i} part={p} />)}
            {m.metadata?.error && <span className="error">{m.metadata.status}: {m.metadata.error}</span>}
          </div>
        ))}
        {error && <p className="error" id="chat-error">{error.message}</p>}
      </main>
      <form onSubmit={submit}>
        <input id="prompt" value={input} onChange={(e) => setInput(e.target.value)}
          placeholder="Say something" autoComplete="off" />
        <button id="send" type="submit" disabled={status === 'submitted' || status === 'streaming'}>Send</button>
        <span id="status" className={`status ${status}`}>{status}</span>
      </form>
    </>
  );
}

function MessagePart({ part }) {
  if (part.type === 'text') return <span className="text">{part.text}</span>;
  if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
    return (
      <span className="tool" data-state={part.state}>
        {part.toolName ?? part.type.slice(5)}({JSON.stringify(part.input)}) → {JSON.stringify(part.output ?? null)}
      </span>
    );
  }
  return null;
}
