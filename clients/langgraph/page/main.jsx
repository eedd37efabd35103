// The useStream demo page: @langchain/langgraph-sdk's React hook, unmodified, against turnstile's
// LangGraph routes on the same origin. The thread ID lives in the address (?thread=…) and the
// running run's ID in sessionStorage (reconnectOnMount), so a reload mid-run rejoins the run and
// shows the rest of its answer. Query parameters tokens and duration_ms are the demo agent's knobs.
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);

function knobs() {
  const demo = {};
  if (params.get("tokens")) demo.tokens = Number(params.get("tokens"));
  if (params.get("duration_ms")) demo.duration_ms = Number(params.get("duration_ms"));
  return Object.keys(demo).length ? { demo } : undefined;
}

function setThreadInAddress(id) {
  const url = new URL(window.location.href);
  url.searchParams.set("thread", id);
  window.history.replaceState(null, "", url);
}

function App() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [text, setText] = useState("");
  const thread = useStream({
    apiUrl: window.location.origin,
    assistantId: params.get("assistant") ?? "agent",
    messagesKey: "messages",
    threadId,
    reconnectOnMount: true,
    onThreadId: (id) => {
      setThreadId(id);
      setThreadInAddress(id);
    },
  });
  const send = (e) => {
    e.preventDefault();
    if (!text.trim()) return;
    thread.submit(
      { messages: [{ type: "human", content: text }] },
      { metadata: knobs(), streamResumable: true },
    );
    setText("");
  };
  return (
    <main style={{ fontFamily: "system-ui, sans-serif", maxWidth: 720, margin: "2rem auto" }}>
      <h1 style={{ fontSize: "1.2rem" }}>turnstile · LangGraph useStream</h1>
      <p data-testid="status">{thread.isLoading ? "streaming" : "idle"}</p>
      {thread.error ? <p data-testid="error">{String(thread.error)}</p> : null}
      <ol data-testid="messages" style={{ paddingLeft: "1.2rem" }}>
        {thread.messages.map((m) => (
          <li key={m.id} data-type={m.type} data-id={m.id}>
            <b>{m.type === "human" ? "you" : "agent"}:</b>{" "}
            <span className="content">{typeof m.content === "string" ? m.content : JSON.stringify(m.content)}</span>
          </li>
        ))}
      </ol>
      <form onSubmit={send}>
        <input data-testid="input" value={text} onChange={(e) => setText(e.target.value)} placeholder="Say something" />
        <button data-testid="send" type="submit">Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
