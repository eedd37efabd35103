// Package consume is the worker's Kafka side: a consumer-group member that runs turns of different
// sessions concurrently while keeping each session's turns strictly in offset order, commits each
// partition at its lowest unfinished record, pauses fetching while it is at capacity (so the backlog
// stays in Kafka, not in memory), and drains on Stop.
//
// Scheduling: every fetched record joins its session's FIFO (the record key is the session ID). A
// session with no running turn is "ready"; ready sessions start in the order they became ready, up
// to the in-flight limit. So a 40-second turn occupies one slot and blocks only its own session,
// never the other sessions of its partition (no head-of-line blocking).
//
// Capacity: fetching pauses when MaxBuffered records could start as soon as a slot frees (the head
// records of ready sessions), or when MaxHeld records in all are waiting. Records queued behind
// their own session's running turn count only towards MaxHeld: were they counted towards the small
// bound, a few sessions with queued follow-ups would fill it, fetching would stop, and every other
// session of the partition would wait for those sessions' turns — head-of-line blocking again. One
// fetch response is bounded too (FetchMaxBytes), since pausing stops new fetches but not one already
// buffered in the client.
//
// Rebalances: partitions are assigned cooperatively. On revoke, records of that partition that have
// not started are dropped (the next owner re-reads them from the committed offset) and the finished
// prefix is committed before the partition is released; turns already running finish under their
// leases, and the next owner waits for them (the claim reports LEASED), so no turn runs twice at
// once and no session is reordered.
package consume
