// Package tasks is the A2A front door's mapping: an implementation of the a2a-go SDK's
// a2asrv.RequestHandler over turnstile's native API (pkg/frontdoor), with no task store of its own,
// so every replica serves every task and a replica that dies loses nothing.
//
// # The mapping
//
//   - contextId is the session. A message without one gets a session ID derived from its messageId
//     (a UUIDv5 without a region prefix), so a client that retries a first message whose answer it
//     lost lands in the same session, and so on the same task.
//   - A task is its first turn: the task ID is that turn's ID (GET /v1/turns/{id} gives the session).
//     A task whose turn ends waiting for the user (the turn's output state input-required or
//     auth-required, wire.Output.State) stays open; a message carrying its taskId runs as the next
//     turn of the same session, with {"a2a": {"task_id": ...}} in the turn's metadata, and the task's
//     state is its latest turn's. A message to a task that is still working, or finished, is refused
//     (unsupported operation), where the Python and Java SDK servers hand it to the agent: a turn's
//     end is announced as the task's end when it happens (the stream's final event, push
//     notifications) and A2A keeps a terminal task terminal, so a message queued behind a working
//     turn would reopen a task already announced completed, or race its completion. The refusal
//     names the way that queues without that: the message without taskId in the task's contextId
//     is the context's next task and runs after this one (per-session order). One whose contextId
//     is not the task's session is invalid params.
//   - A push config set without an id takes the task's ID (as the Python and Java SDK servers do):
//     setting one again replaces it, and a get by the task alone finds it.
//   - messageId is the turn's Idempotency-Key, which intake scopes by tenant and session: a message
//     sent again (five times at once, say) is the same turn, run once, answered as the same task.
//   - The message's metadata is the turn's metadata (the demo agent's knobs travel there); its text
//     parts are the turn's input. Other parts, or accepted output modes that exclude text, are
//     "content type not supported".
//
// How a task's turns read as an A2A Task (states, history, artifacts) is package pkg/a2atask's,
// shared with the notifier, which pushes the same rendering. historyLength keeps the newest
// messages. Until the worker claims a follow-up turn its
// row does not yet name its task, so tasks/get may show the task's previous state for that moment;
// the send's own answer and its stream never do. Follow-ups are looked for among the session's
// newest Config.TurnsPage (100) turns.
//
// # Streams
//
// message/stream and tasks/resubscribe follow the turn's native stream (the gateway's SSE route,
// through frontdoor.OpenStream, which reconnects across gateway drains) and render each event:
// turn.started, tool calls and results (data parts {"tool_call": …}, {"tool_result": …}),
// turn.waiting and turn.retrying are status-updates (working); turn.delta is an artifact-update of
// the turn's response artifact, append:true except for an attempt's first delta (index 0), which is
// sent with append:false: after a worker crash, turn.retrying is followed by the new attempt's
// deltas from index 0, so the client's artifact restarts with the retried attempt instead of
// holding the dead attempt's words. turn.completed is an artifact-update with the whole output
// (append:false, lastChunk:true) and the final status-update (completed, input-required or
// auth-required; final:true); turn.failed, turn.cancelled and turn.expired are the final
// status-update. stream.reset (the history after the client's cursor was lost) and
// stream.revoked end the stream with a JSON-RPC error: the client reads the task with tasks/get.
//
// Every SSE event carries an id: the native id (<epoch>:<entry>) of the event it renders. The
// completion renders as two events: the first gets "<native id>~0", the second the native id, so
// either resumes exactly; the Task that opens a stream gets "0", which means "before the turn's
// first event". tasks/resubscribe with Last-Event-ID continues right after that id, with no
// duplicate and no gap; without one it starts with the task's current snapshot (a Task) and the
// current turn's events from its start (the artifact restarts with index 0, as above). The SDK's
// client does not expose SSE ids, so each status and artifact event also carries its id in
// metadata["turnstile/event_id"] for clients that resume through the SDK.
//
// # Sends
//
// message/send answers once the turn is durable in Kafka (intake's 202), with the task submitted.
// With configuration.blocking (the SDK's default when the field is absent) it follows the turn's
// stream until it ends or waits for the user, at most Config.MaxBlock, and answers the task as the
// stream left it, without reading Postgres (a stream that fails early answers the task as far as it
// got: it is durable either way). tasks/cancel cancels the task's running turn and
// follows its stream until it ends (at most Config.CancelWait); a task that ended or waits for the
// user is not cancelable.
//
// # Push notifications
//
// tasks/pushNotificationConfig/set|get|list|delete call intake's /v1/turns/{task id}/push-configs
// routes; configuration.pushNotificationConfig on message/send and message/stream travels with the
// turn (push_configs), so it is stored with the task before the turn's first status change. A
// config without an id gets one (from the messageId for a send, so a retried send is the same
// request). The notifier role POSTs the task as tasks/get renders it at every status change of
// every turn of the task; credentials are write-only (get and list show the schemes).
//
// The native API's refusals keep their meaning: 404 is task not found (another tenant's task
// included), 400/422 invalid params, 429/503 an HTTP 429/503 with Retry-After before anything is
// streamed (see package rpc), transport failures 503.
package tasks
