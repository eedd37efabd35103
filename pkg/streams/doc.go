// Package streams is the Redis side of a session's event stream, shared by the worker (which
// publishes) and the gateway (which reads).
//
// Each session has one Redis Stream and one metadata hash, both hash-tagged by session so they live
// on one Redis Cluster slot. <session> is the session's key, wire.SessionKey (tenant "/" session
// ID), so the hash tag covers the tenant too:
//
//	<prefix>:s:{<session>}:events   the events, entry IDs assigned by Redis
//	<prefix>:s:{<session>}:meta     epoch, per-turn fencing tokens f:<turn>, per-turn terminal
//	                                t:<turn> = "<epoch>:<id>", and last, the newest entry the
//	                                publisher appended
//	<prefix>:s:{<session>}:notify   Pub/Sub channel; each publish call that appends to the stream
//	                                publishes the cursor "<epoch>:<id>" of its last append there
//
// Publishing is one Lua script: it rejects a write whose fencing token is older than the newest one
// the turn has published with (so a zombie attempt changes nothing once a newer attempt has spoken),
// keeps at most one terminal event per turn, starts a new epoch whenever the stream key or the epoch
// is absent (so a stream lost to a restart or eviction can never be silently continued; fencing
// tokens and terminal markers survive the new epoch, so a zombie cannot write after a loss), trims
// by length and age (approximate MAXLEN and MINID), refreshes the idle TTL and notifies readers.
//
// The script takes many events at once, each with its own keys, token and result, and runs each
// exactly as if it were published alone. PublishMany sends all of a batch's script calls in one
// pipelined round trip (one per node on Redis Cluster): the worker gathers the events of all its
// running turns into such batches, so a turn's events share round trips and script runs with other
// turns'. Within a call the script does once per session what publishing one event at a time would
// do for every event (reading the meta hash, finding the newest entry, trimming, setting TTLs);
// publish.lua says why each part is exact.
//
// A script call may only touch keys of one cluster slot. On one Redis node (a *redis.Client, plain
// or Sentinel-managed) a call holds up to 64 events of any sessions. With any other client (Redis
// Cluster; also a ring) a call holds one session's events: a session's keys share its slot through
// the hash tag, and grouping by slot instead would put two sessions in one call only when they
// happen to share one of the 16,384 slots, about 8 pairs in a batch of 500 sessions. So on a
// cluster a batch of one event per session (the worker's usual batch) pays a script run per event;
// a session's several events in one batch still share a call there.
//
// Trimmed history is detected exactly: Redis does not record the newest entry XTRIM removed
// (max-deleted-entry-id only follows XDEL), so every entry carries a "prev" field naming the entry
// before it. A cursor before the oldest retained entry that is not that entry's predecessor has
// lost events, and the gateway answers it with stream.reset (State.Lost). Readers that label entries
// with an epoch read both in one MULTI (Reader.Read).
//
// An SSE event ID is "<epoch>:<entry id>"; see Cursor.
package streams
