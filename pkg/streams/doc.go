// Package streams is the Redis side of a session's event stream, shared by the worker (which
// publishes) and the gateway (which reads).
//
// Each session has one Redis Stream and one metadata hash, both hash-tagged by session so they live
// on one Redis Cluster slot:
//
//	<prefix>:s:{<session>}:events   the events, entry IDs assigned by Redis
//	<prefix>:s:{<session>}:meta     epoch, per-turn fencing tokens, per-turn terminal "<epoch>:<id>"
//	<prefix>:s:{<session>}:notify   Pub/Sub channel; each append publishes its cursor "<epoch>:<id>"
//
// Publishing is one Lua script: it rejects a write whose fencing token is older than the newest one
// the turn has published with (so a zombie attempt changes nothing once a newer attempt has spoken),
// keeps at most one terminal event per turn, starts a new epoch whenever the stream key is absent (so
// a stream lost to a restart or eviction can never be silently continued; fencing tokens and
// terminal markers survive the new epoch, so a zombie cannot write after a loss), trims by length
// and age (approximate MAXLEN and MINID), refreshes the idle TTL and notifies readers.
//
// PublishMany sends the script for many events in one pipelined round trip (one per node on Redis
// Cluster), each with its own keys, token and result: the worker gathers the events of all its
// running turns into such pipelines, so a no-op turn's three events cost a share of three round
// trips instead of three each. A pipeline runs its scripts in the order given, and the scripts are
// atomic one by one, so fencing is decided per event exactly as with Publish.
//
// Trimmed history is detected exactly: Redis does not record the newest entry XTRIM removed
// (max-deleted-entry-id only follows XDEL), so every entry carries a "prev" field naming the entry
// before it. A cursor before the oldest retained entry that is not that entry's predecessor has
// lost events, and the gateway answers it with stream.reset (State.Lost). Readers that label entries
// with an epoch read both in one MULTI (Reader.Read).
//
// An SSE event ID is "<epoch>:<entry id>"; see Cursor.
package streams
