// Package streams is the Redis side of a session's event stream, shared by the worker (which
// publishes) and the gateway (which reads).
//
// Each session has one Redis Stream and one metadata hash, both hash-tagged by session so they live
// on one Redis Cluster slot:
//
//	<prefix>:s:{<session>}:events   the events, entry IDs assigned by Redis
//	<prefix>:s:{<session>}:meta     epoch, per-turn fencing tokens, per-turn terminal entry
//	<prefix>:s:{<session>}:notify   Pub/Sub channel; each append publishes its cursor "<epoch>:<id>"
//
// Publishing is one Lua script: it rejects a write whose fencing token is older than the newest one
// the turn has published with (so a zombie attempt changes nothing once a newer attempt has spoken),
// keeps at most one terminal event per turn, starts a new epoch whenever the stream key is absent (so
// a stream lost to a restart or eviction can never be silently continued), trims by length and age,
// refreshes the idle TTL and notifies readers.
//
// An SSE event ID is "<epoch>:<entry id>"; see Cursor.
package streams
