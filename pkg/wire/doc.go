// Package wire holds the shapes that cross process boundaries in turnstile: the versioned turn
// envelope that intake produces to Kafka and workers consume, the event types that workers publish
// to a session's Redis Stream and the gateway relays over SSE, and the turn status vocabulary shared
// by the HTTP API and Postgres.
//
// Everything here is a compatibility contract. Fields are only ever added; a reader ignores fields it
// does not know, and the envelope carries a version so a breaking change can be introduced beside the
// old one rather than over it.
package wire
