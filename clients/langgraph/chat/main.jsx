// The chat test page: what LangChain's agent-chat-ui does against a LangGraph server, with the
// same SDK calls, served from an origin other than the API's (TestLangGraphChatUI). At load it
// calls GET /info as the app's connection check; the sidebar lists the assistant's threads with
// threads.search (metadata graph_id, as the app does) and shows each one's first message from its
// values.messages; the conversation is useStream with fetchStateHistory, onCustomEvent,
// reconnectOnMount and stream modes values, messages-tuple and custom; a human message is sent as
// the app sends it (its own id, text content blocks, shown at once through optimisticValues).
// The thread ID lives in the address (?threadId=…), so a reload restores the conversation.
// Query parameters: apiUrl (the LangGraph API), assistantId (default "agent"), the demo agent's
// knobs tokens, custom and duration_ms, and observe=1, which also registers useStream's
// onLangChainEvent, onDebugEvent, onCheckpointEvent and onTaskEvent (so runs ask for the events,
// debug, checkpoints and tasks modes too) and counts what each receives.
import { StrictMode, useCallback, useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("apiUrl") ?? window.location.origin;
const assistantId = params.get("assistantId") ?? "agent";
const observe = params.get("observe") === "1";

function knobs() {
  const demo = {};
  for (const k of ["tokens", "custom", "duration_ms"]) {
    if (params.get(k)) demo[k] = Number(params.get(k));
  }
  return Object.keys(demo).length ? { demo } : undefined;
}

function setThreadInAddress(id) {
  const url = new URL(window.location.href);
  if (id) url.searchParams.set("threadId", id);
  else url.searchParams.delete("threadId");
  window.history.replaceState(null, "", url);
}

// contentString is a message's text: a string, or its text content blocks joined.
function contentString(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.filter((c) => c.type === "text").map((c) => c.text).join(" ");
  }
  return "";
}

// checkGraphStatus is the app's connection check: GET /info answers 2xx.
async function checkGraphStatus() {
  try {
    const res = await fetch(`${apiUrl}/info`);
    return res.ok;
  } catch {
    return false;
  }
}

function Sidebar({ threads, current, onSelect, onNew }) {
  return (
    <nav style={{ width: 240, borderRight: "1px solid #ddd", paddingRight: "1rem" }}>
      <button data-testid="new-thread" type="button" onClick={onNew}>New thread</button>
      <ul data-testid="threads" style={{ listStyle: "none", padding: 0 }}>
        {threads.map((t) => {
          const first = Array.isArray(t.values?.messages) ? t.values.messages[0] : undefined;
          return (
            <li key={t.thread_id} data-thread-id={t.thread_id} data-current={t.thread_id === current ? "1" : "0"}>
              <button type="button" onClick={() => onSelect(t.thread_id)}>
                {first ? contentString(first.content) : t.thread_id}
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

function App() {
  const [threadId, setThreadId] = useState(params.get("threadId"));
  const [connection, setConnection] = useState("checking");
  const [threads, setThreads] = useState([]);
  const [custom, setCustom] = useState([]);
  const [observed, setObserved] = useState({});
  const count = (kind, name) =>
    setObserved((prev) => ({ ...prev, [kind]: [...(prev[kind] ?? []), name] }));
  const [text, setText] = useState("");
  const client = useMemo(() => new Client({ apiUrl }), []);

  useEffect(() => {
    checkGraphStatus().then((ok) => {
      setConnection(ok ? "connected" : "failed");
      if (!ok) console.error("Failed to connect to LangGraph server");
    });
  }, []);

  const refreshThreads = useCallback(() => {
    client.threads
      .search({ metadata: { graph_id: assistantId }, limit: 100 })
      .then(setThreads)
      .catch((e) => console.error("threads.search failed", e));
  }, [client]);
  useEffect(refreshThreads, [refreshThreads]);

  const select = (id) => {
    setCustom([]);
    setThreadId(id);
    setThreadInAddress(id);
  };

  const stream = useStream({
    apiUrl,
    assistantId,
    threadId,
    fetchStateHistory: true,
    reconnectOnMount: true,
    onThreadId: (id) => {
      select(id);
      refreshThreads();
    },
    onCustomEvent: (event) => setCustom((prev) => [...prev, event]),
    ...(observe
      ? {
          onLangChainEvent: (e) => count("events", e.event),
          onDebugEvent: (e) => count("debug", e.type),
          onCheckpointEvent: () => count("checkpoints", "checkpoint"),
          onTaskEvent: (e) => count("tasks", "result" in e ? "result" : "task"),
        }
      : {}),
    onFinish: () => refreshThreads(),
    onError: (e) => console.error("stream failed", e),
  });

  const send = (e) => {
    e.preventDefault();
    if (!text.trim() || stream.isLoading) return;
    const human = { id: crypto.randomUUID(), type: "human", content: [{ type: "text", text }] };
    setCustom([]);
    setObserved({});
    stream.submit(
      { messages: [human] },
      {
        streamMode: ["values", "messages-tuple", "custom"],
        streamResumable: true,
        metadata: knobs(),
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), human] }),
      },
    );
    setText("");
  };

  return (
    <div style={{ display: "flex", gap: "1rem", fontFamily: "system-ui, sans-serif", margin: "1rem" }}>
      <Sidebar threads={threads} current={threadId} onSelect={select} onNew={() => select(null)} />
      <main style={{ flex: 1 }}>
        <h1 style={{ fontSize: "1.1rem" }}>turnstile · LangGraph chat</h1>
        <p>
          <span data-testid="connection">{connection}</span> ·{" "}
          <span data-testid="status">{stream.isLoading ? "streaming" : "idle"}</span> ·{" "}
          <span data-testid="thread">{threadId ?? ""}</span>
        </p>
        {stream.error ? <p data-testid="error">{String(stream.error)}</p> : null}
        <ol data-testid="messages" style={{ paddingLeft: "1.2rem" }}>
          {stream.messages.map((m, i) => (
            <li key={m.id ?? i} data-type={m.type}>
              <b>{m.type === "human" ? "you" : "agent"}:</b> <span className="content">{contentString(m.content)}</span>
            </li>
          ))}
        </ol>
        <ul data-testid="custom" style={{ color: "#666" }}>
          {custom.map((c, i) => (
            <li key={i}>{JSON.stringify(c)}</li>
          ))}
        </ul>
        {observe ? <pre data-testid="observed">{JSON.stringify(observed)}</pre> : null}
        <form onSubmit={send}>
          <input data-testid="input" value={text} onChange={(e) => setText(e.target.value)} placeholder="Type your message…" />
          <button data-testid="send" type="submit">Send</button>
        </form>
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
