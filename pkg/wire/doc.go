// Package wire holds the shapes that cross process boundaries in turnstile: the versioned turn
// envelope that intake produces to Kafka and workers consume, the event types that workers publish
// to a session's Redis Stream and the gateway relays over SSE, and the turn status vocabulary shared
// by the HTTP API and Postgres.
//
// A session is named in every store by its key, a SessionKey (NewSessionKey(tenant, session ID)), so
// isolation between tenants holds by construction: the Kafka record key, the Redis keys and the
// Postgres rows are the key's String form, while the API and the events show the client's session ID
// (SessionKey.SessionID). The key and the ID are different types, so the compiler keeps them apart.
// The envelope keeps carrying the client's session ID and the tenant; a worker derives the key from
// those two (Envelope.SessionKey), which is what makes records written before sessions were keyed run in
// the right session. A turn ID the client minted is scoped the same way: the stores know the turn
// by ClientTurnKey(tenant, client's ID), and the envelope carries the client's ID as ClientTurnID,
// which the events show (Envelope.ShownTurnID).
//
// Everything here is a compatibility contract. Fields are only ever added; a reader ignores fields it
// does not know, and the envelope carries a version so a breaking change can be introduced beside the
// old one rather than over it.
package wire
