// Package gateway is turnstile's gateway role: it relays each session's Redis Stream to browsers
// over Server-Sent Events with gap-free Last-Event-ID resume, sharing one Redis reader per session
// among all of a replica's clients (see internal/hub and internal/sse).
//
// It keeps serving live streams while Kafka or Postgres is down: neither is on its path.
package gateway
