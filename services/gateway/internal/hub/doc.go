// Package hub shares Redis reads among a gateway replica's SSE clients. Each session with local
// clients has one feed: it learns of new entries from one Pub/Sub connection shared by the whole
// replica (each publish script call that appends to a session announces its last append's
// cursor there; the feed reads the payload only as a wake-up), reads them once with XRANGE from its
// last ID into a ring shared by the session's local subscribers, and wakes them. Feeds own no
// goroutine: a woken feed joins a queue, and a few readers (Config.Readers) each read up to
// Config.ReadBatch queued feeds in one round trip (streams.Reader.ReadMany), so a replica whose
// thousands of sessions each grow several times a second spends a few pipelined round trips on
// them, not one pooled connection per session per entry: the pool, which the replica's other
// roles may share, never queues behind the reads. Each subscriber
// holds only its position in the ring and how to wake it — a channel (Subscribe), or a function
// (SubscribeFunc) for a caller that keeps no goroutine waiting, like the SSE handler's parked
// streams — so an idle one costs a few hundred bytes; one that falls
// more than the ring's size behind is cut loose (Next reports it lost) so it cannot stall the
// others, and resumes from its cursor. The feed never blocks on a subscriber.
//
// So the Redis connections a replica uses are bounded — one Pub/Sub connection plus the command
// pool — whatever the number of clients, and no blocking XREAD ever holds a pooled connection.
//
// An idle feed costs Redis nothing. Pub/Sub loses notifications only while the connection is down,
// and go-redis subscribes every channel again when it reconnects: each subscription confirmation
// makes its feed re-read from its last ID, which covers what was appended meanwhile. As a last
// resort for a notification lost any other way, one loop for the whole hub wakes every feed that has
// not read for Config.Resync (30s). The resync is rare on purpose: under a deep backlog (thousands
// of sessions with a queued turn and an open stream) frequent re-reads cost Redis and the gateway
// more than the events themselves and take capacity from workers on the same machine (see
// docs/BENCHMARKS.md, "Burst scenario").
package hub
