// Package chat serves the AI SDK's chat routes over turnstile's native API (pkg/frontdoor):
//
//	POST /v1/chat                  DefaultChatTransport's request: {id, messages, trigger, messageId}
//	POST /v1/chat/{chat_id}        the same with the chat ID in the path (it must match a body id)
//	GET  /v1/chat/{chat_id}/stream the resume request: the active turn's stream, or 204
//	GET  /v1/chat/{chat_id}/messages the chat's messages as UIMessage JSON, to seed useChat
//
// The chat ID is the session ID; the last message, which must be the user's, is the turn's input
// (its text parts joined). Optional body members `metadata` (turn metadata) and `multitask`
// (enqueue, reject or interrupt) pass through to the turn; X-Deadline-Epoch-Ms passes through as
// the deadline. A submitted message is posted with an Idempotency-Key made of the chat ID and the
// message ID, so a client that retries a POST gets the same turn, not a second one.
//
// Everything the native API decides is inherited, not copied: the Authorization header is
// forwarded, so auth, tenancy, quotas, admission (429/503 + Retry-After), double-texting and the
// stream's cursor and epoch rules are intake's and the gateway's. Every refusal is answered before
// the stream starts, as the native problem document; once the 200 stream has begun, a failure is an
// `error` part.
//
// Both the POST's answer and the resume follow the turn from its first event (package uistream
// renders it), so the answer is the same parts whichever request carries it. The resume follows
// the chat's oldest turn that is not terminal (the one running; with enqueued turns behind it,
// those are resumed by the next request once it ends). A Last-Event-ID, which the default
// transport does not send, resumes after that part exactly.
package chat
