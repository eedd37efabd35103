// Package aisdk is turnstile's AI SDK front door (role `aisdk`): the chat routes that the AI SDK's
// `useChat` hook (npm `ai` and `@ai-sdk/react`, v5 and later) calls through its
// DefaultChatTransport, and the useChat page at /chat/.
//
// A chat is a session and each submitted user message a turn. The role is a stateless translator
// in front of the native API (pkg/frontdoor): it posts the turn to intake and follows the
// session's stream at the gateway with the caller's credential, rendering the turn's events as the
// UI message stream protocol (internal/uistream). So the turn is durable in Kafka before the
// stream starts, and auth, tenancy, admission, quotas, double-texting and the stream's cursor and
// epoch rules are the native API's (internal/chat). A reload resumes the active turn through
// GET /v1/chat/{chat_id}/stream: the resumable-stream helper usually put behind useChat keeps the
// chunks in one process's memory, while here they are the session's Redis Stream, written by a
// fenced worker, so a killed worker, gateway or aisdk replica loses nothing.
//
// The role holds no state of its own: any replica serves any chat, and it needs only intake
// (sends) and the gateway (streams), at TURNSTILE_INTAKE_URL and TURNSTILE_GATEWAY_URL, each this
// process's own listener by default (make dev, the all-in-one binary).
package aisdk
