// Package streams is the Redis side of a session's event stream, shared by the worker (which
// publishes) and the gateway (which reads).
//
// Each session has one Redis Stream and one metadata hash, both hash-tagged by session so they live
// on one Redis Cluster slot. <session> is the session's key, wire.SessionKey (tenant "/" session
// ID), so the hash tag covers the tenant too:
//
//	<prefix>:s:{<session>}:events   the events, entry IDs assigned by Redis
//	<prefix>:s:{<session>}:meta     epoch, per-turn fencing tokens f:<turn>, per-turn terminal
//	                                t:<turn> = "<epoch>:<id>", last, the newest entry the
//	                                publisher appended, and the fence generation fid and its
//	                                floor (see "Fences through a Redis loss")
//	<prefix>:s:{<session>}:notify   Pub/Sub channel; each publish call that appends to the stream
//	                                publishes the cursor "<epoch>:<id>" of its last append there
//
// Publishing is one Lua script: it rejects a write whose fencing token is older than the newest one
// the turn has published with (so a zombie attempt changes nothing once a newer attempt has spoken),
// keeps at most one terminal event per turn, starts a new epoch whenever the stream key or the epoch
// is absent (so a stream lost to a restart or eviction can never be silently continued; fencing
// tokens and terminal markers survive the new epoch, and where the meta hash holding them is lost
// too, they are established again from Postgres: see below), trims
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
//
// # Fences through a Redis loss
//
// The fences above are facts Redis holds, so a Redis that loses its data (a restart without
// persistence, FLUSHALL, a failover to a replica that lagged, an evicted meta hash) loses them: a
// zombie attempt whose newer attempt spoke before the loss would find no fence after it, and a
// finished turn's record, redelivered, would find no terminal marker. Postgres keeps what survives:
// every turn's current fencing token, all drawn from one sequence that only grows. A publisher
// given a Fencer (Publisher.WithFencer; the worker's and intake's are turnstore.Store) anchors the
// Redis fences in it, with no Postgres read for an event of a session whose fences Redis holds:
//
//   - A meta hash's fences are complete above its floor. The floor is the newest token the
//     sequence had handed out when it was read, and it is read after the hash's fence generation
//     (fid, a random name) began. Every attempt that spoke into a hash Redis lost held a token
//     handed out before the loss, so before the generation began, so at most the floor. An attempt
//     with a token above the floor was claimed after the generation began: whatever a newer attempt
//     of its turn publishes lands in this hash, where its fence refuses the older one.
//   - A meta hash without a floor is not open: the script writes nothing but the name of its
//     generation (minting fid if the hash has none) and refuses the events (status -3). The
//     publisher then reads the floor and the turns' tokens from Postgres in one query and sends
//     the events again with "open fid at floor": the script opens the generation only if it is
//     still fid, so a floor read before another loss never opens the next generation.
//   - An event whose turn has no fence in the hash and whose token is at most the floor is from an
//     attempt claimed before the generation began: it needs the publisher's word that Postgres
//     still holds its token, read after the generation began (verified = fid), else the script
//     refuses it (status -4). A token Postgres has seen superseded fails with ErrStaleToken; the
//     verified event writes the turn's fence, so its attempt's later events need no read.
//
// The terminal marker t:<turn> goes with a lost hash too, and Redis cannot tell a session it lost
// from one it never had. So a terminal event is only ever published again for a turn found
// finished by the turn's own record redelivered after a crash between the finish's commit and its
// publish (the worker's republish; execute.turn.republishTerminal): another record of a finished
// turn, such as a client re-posting its Idempotency-Key after intake's record of the key went with
// Redis, publishes nothing. A redelivery of the turn's own record after a Redis loss that follows
// its terminal event (a crash after the publish but before the offset commit, and a loss, both
// within moments) can still repeat the event: Postgres does not record that it was published.
//
// So each session pays one more round trip and one Postgres read when its generation begins (its
// first publish, and its first after a loss), and a turn claimed before that pays one read more.
// The read is of a sequence and primary keys. Establishing is retried up to three times when Redis
// loses the session again meanwhile; a publish that cannot establish its fence (Postgres
// unreachable) fails with ErrFenceUnknown, having written nothing, and may be tried again. A
// publisher without a Fencer fences in Redis alone (its events open no generation, and it is refused
// where a turn's fence is not known above a floor).
package streams
