// Package batch is the worker's group-commit batcher: the turns a worker runs at once send their
// claims, completions and event publishes through one Batcher per kind, and each Batcher turns the
// requests that are waiting into one round trip — one set-based Postgres statement, one Redis
// pipeline — instead of one round trip per turn per step.
//
// Why: a no-op turn is a handful of tiny statements and scripts, so a worker that sends them one by
// one is bound by round trips and by commits, not by work. Run together, n claims cost one statement,
// one commit and one network round trip, and the database does the per-row work in one pass. Each
// row keeps its own conditions (the claim's lease rules, the completion's fencing token, the publish
// script's fence), so batching changes how many round trips there are, never what a turn may do.
//
// How: a flusher goroutine waits for a first request, takes whatever else is queued (up to
// MaxBatch), runs the batch and hands every caller its own result; what arrives meanwhile forms the
// next batch. There is no timer: at low load a request goes out alone and at once, and under load a
// batch holds what arrived during one round trip of the previous one, so batches size themselves to
// the load and latency stays one round trip plus the wait for the batch in flight. A caller whose
// context ends stops waiting at once; its request is dropped if it was not sent yet, or handed to
// Config.Abandoned when its batch returns if it was (so a lease claimed for nobody can be released).
// A batch that fails as a whole fails every request in it with the same error.
//
// With more than one flusher (the worker uses two per kind, so one batch gathers while another is
// in flight on a second connection), batches may overlap and requests of different batches may
// complete in any order. Callers that need order wait for each result before sending their next
// request; a turn does exactly that for its events, so its events stay in order.
//
// Callers take a Batcher as a one-method interface of its Do (the executor's Claimer, Completer
// and Publisher). Func has the same Do, running one request alone per call, so the batch function
// itself (a lease store's ClaimMany, say) serves such a caller unbatched. Idle says whether a
// request given now would go out at once (a flusher free, nothing queued): a caller that may either
// send something now or fold it into a later request (the executor's early publish of a quick
// turn's first events) sends it now only then.
//
// A Batcher follows pkg/lifecycle: Start returns at once with the flushers running, Stop refuses new
// requests, cancels the batch in flight and fails whatever is still queued, so no caller is left
// waiting.
package batch
