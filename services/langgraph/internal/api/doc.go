// Package api serves LangGraph's threads-and-runs API (the Agent Protocol routes that
// @langchain/langgraph-sdk's Client and its React useStream hook call) as a translator in front of
// turnstile's native API, through pkg/frontdoor.
//
// The mapping:
//   - A thread is the session of the same ID in the caller's tenant; POST /threads stores the thread
//     (internal/threads) so it exists, with its metadata, before any run. Thread IDs are minted as
//     UUIDv7 unless the client names one (a valid session ID).
//   - Threads are bounded: a tenant's count (Config.ThreadsMax, 409 threads-limit, counted under a
//     per-tenant lock in the creating transaction), a thread's metadata (Config.MetadataMax, 422),
//     and an idle thread's life (TURNSTILE_LANGGRAPH_THREAD_TTL, deleted by the workers' retention
//     cleaner). DELETE /threads/{id} deletes the thread row only, and only while no run of it is
//     queued or running (409 thread-busy otherwise): its runs are turns, which keep their rows
//     until retention so a redelivered record still finds its turn done and never runs again.
//   - A run is a turn: run_id is the turn ID, the run's input messages (their human text, joined by
//     blank lines) are the turn's input, its metadata the turn's metadata (so the demo agent's knobs
//     pass through), plus a "langgraph" member recording the assistant and the stream modes, which
//     a join without stream_mode renders. An Idempotency-Key header is forwarded, so a retried
//     create returns the same run.
//   - assistant_id must be one of TURNSTILE_LANGGRAPH_ASSISTANTS (404 otherwise); every assistant
//     runs the workers' agent.
//   - multitask_strategy reject (LangGraph's default), enqueue and interrupt are the native
//     multitask strategies; rollback is refused with 422, as are stream modes internal/render
//     does not render (it renders values, messages-tuple, updates, custom, events, debug, tasks,
//     checkpoints and tools from the run's native events), and inputs this front door cannot run
//     (a command, no human text).
//   - Each run stamps its thread's metadata with graph_id and assistant_id, as the Platform does:
//     chat front ends list an assistant's threads by them (threads.search).
//   - A cron is a native schedule (/v1/schedules, fired once per tick by intake's scheduler):
//     on a thread, each tick's run is a turn of the thread's session; without one, of a new
//     session per tick (crons.go). The store is a tenant's namespaced key-value items in Postgres
//     (internal/store); semantic search is refused (store.go).
//   - State and history are the thread's turns as messages: one checkpoint per finished turn, named
//     by its run ID. A state set through the API (POST /threads/{id}/state, the copy of a thread)
//     is stored on the thread row (a checkpoint of its own, followed by the runs after it) and
//     rewritten into the session history the agent reads (turnstore.RewriteHistory), so the next
//     run answers from it. A run or update naming a checkpoint other than the head is a 409
//     stale-checkpoint: a thread goes on from its latest state only.
//   - Deleted runs (runs.delete, cancel with action=rollback) are named in langgraph_deleted_runs
//     and hidden; a rolled-back one from the state too. Their turns stay until retention.
//   - Stateless runs (POST /runs…) run on a throwaway thread deleted once the run ended
//     (stateless.go). on_disconnect=cancel cancels a run whose stream's client left before its end.
//   - POST /threads/search filters in SQL (metadata containment, IDs, the status of the session's
//     newest turn) and, for a values filter, over the threads' messages.
//
// Streams: the SSE id of each event is the native event's id ("<epoch>:<entry>"), so a join with
// Last-Event-ID resumes the native stream exactly, with its epoch rule (a native stream.reset
// becomes an error event named StreamReset). When one native event becomes several protocol
// events, all but the last carry "<previous native id>~<k>": resuming from it re-renders that
// native event and skips its first k+1 protocol events, so no event is lost or repeated either way.
// Every stream answer names the run in Content-Location and its join route in Location, so the SDK
// reconnects by itself (with Last-Event-ID) when a stream ends before the run: a draining replica
// ends its streams that way.
//
// Routing: each of the Platform's path families (/ok, /info, /threads, /assistants, /runs, /store,
// /crons) is a sub-router of its own, so every path under one is answered here, served or not:
// the CORS preflight and headers (Config.CORSOrigins, through httpx.CORS), a body read as JSON
// whatever its label (as the Platform reads it), and a 404 or 405 no route serves counted in
// turnstile_langgraph_unrouted_total and logged at debug level with its method and path.
//
// Auth: the SDK sends its API key as x-api-key; it is forwarded as the native Bearer credential,
// so auth, tenancy, admission and quotas are intake's. The thread table is read for the tenant the
// key names (apikey), "default" with TURNSTILE_AUTH=off. Refusals are problem documents, whose
// detail member is what LangGraph clients print.
package api
