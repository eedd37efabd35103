// Package consume is the worker's Kafka side: a consumer-group member that runs turns of different
// sessions concurrently while keeping each session's turns strictly in offset order, commits each
// partition at its lowest unfinished record, pauses fetching while it is at capacity (so the backlog
// stays in Kafka, not in memory), and drains on Stop.
//
// Scheduling: every fetched record joins its session's FIFO (the record key is the session's key,
// "<tenant>/<session ID>"). A session with no running turn is "ready"; the next turn to start is
// chosen in two steps (fair.go). First the tenant: start-time fair queueing over the tenants with
// a ready session — each tenant's virtual time grows by 1/weight per start (Config.Weights,
// default 1) and the tenant with the least goes next, so while several tenants have turns ready
// each gets its weighted share of the slots whatever the size of its backlog, and a tenant that
// was idle joins at the current virtual time (idleness earns no burst). Then the tenant's turn:
// the highest priority (the record's PriorityHeader, wire.PriorityMin to PriorityMax) among its
// ready sessions, taking turns between partitions on a tie, and within one partition the oldest
// head record first (a session's follow-up does not queue behind sessions that became ready
// while its previous turn ran). Priority so orders a tenant's own turns and never takes another
// tenant's share. A Limiter (the tenant's concurrency quota) may hold a tenant back: it leaves
// the fair order until one of its turns ends or Recheck is called, and its waiting head records
// are handed to Config.Held once. SchedulerArrival instead treats every record as one tenant's,
// without priorities: the order before tenants were scheduled, kept for comparison.
//
// A 40-second turn occupies one slot and blocks only its own session, never the other sessions of
// its partition (no head-of-line blocking), and under a deep backlog no partition's oldest turn
// of a tenant waits while another partition's fetched records are worked off. For the fair order
// to reach past a noisy tenant's backlog to the other tenants' turns, the worker sets MaxBuffered
// and MaxHeld to its read-ahead (TURNSTILE_WORKER_READ_AHEAD): the other tenants' records are
// found only once fetched.
//
// Capacity: the consumer takes every record the client has fetched as soon as it arrives (the
// client hands a fetch out partition by partition, so taking a few records at a time would serve one
// partition's share of the fetch before the next one's). MaxBuffered and MaxHeld are split evenly
// between the assigned partitions, and a partition's fetching pauses when it holds its share of
// records that could start as soon as a slot frees (the head records of its ready sessions), or its
// share of records in all. Records queued behind their own session's running turn count only
// towards MaxHeld: were they counted towards the small bound, a few sessions with queued follow-ups
// would fill it, fetching would stop, and every other session of the partition would wait for those
// sessions' turns — head-of-line blocking again. A partition can pass its shares by the rest of one
// fetch, so one fetch response is bounded too (FetchMaxBytes, a quarter of it per partition): the
// backlog stays in Kafka, not in memory. Pausing per partition rather than all at once keeps every
// partition supplied: while one partition's fetched records are worked off, the others are still
// fetched as they run low. A resumed partition joins the next fetch, after the one in flight; the
// broker holds a fetch of caught-up partitions for at most the fetch wait (100ms), which bounds how
// long a resumed partition can run dry.
//
// Rebalances: partitions are assigned cooperatively. On revoke, records of that partition that have
// not started are dropped (the next owner re-reads them from the committed offset) and the finished
// prefix is committed before the partition is released; turns already running finish under their
// leases, and the next owner waits for them (the claim reports LEASED), so no turn runs twice at
// once and no session is reordered.
//
// Lifecycle: New only checks and completes the configuration; Start builds the group client, which
// joins the group, and Stop drains and closes it (package lifecycle's contract: Stop honours its
// context's deadline, and a consumer can be started again once stopped). It only consumes: the
// worker dead-letters with a producer of its own (package deadletter).
//
// Joining: from Start until the group has completed the member's first assignment, Waiting says
// so, and the worker is not ready. After a member died, the group assigns its partitions only once
// its session has timed out, so a replacement started at once waits that long.
//
// Broker faults: the topic can come back as another incarnation under its name — deleted and
// recreated on a real Kafka, or the embedded broker restarted, which loses its topics, groups and
// offsets. franz-go never moves to a new incarnation by itself (fetches and commits of the topic
// fail with UNKNOWN_TOPIC_ID), so the consumer does: when a commit or a fetch of the topic fails
// so, or when the topic's ID (asked of a broker each time partitions of it are assigned) changed,
// it drops its partitions' states without a commit (their offsets are the old incarnation's),
// purges the topic from the client and adds it back, and the group assigns the new incarnation's
// partitions, read from the group's committed offsets or from the start. The turns whose records
// were lost come back through intake's re-driver (package redrive). After a broker lost its state
// that takes the group's rejoin (the members learn of the lost group at their next heartbeat, at
// most 3 s), after a refused commit a moment, and an idle member of a recreated topic, which
// learns of it from fetches only, about ten seconds (the client backs them off and refreshes
// metadata at most every 5 s). A partition whose records
// the broker lost below what was consumed (kgo.ErrDataLoss) starts afresh where the client resumes
// it. Fetch and commit errors that repeat are logged with a rate limit (the first at once, then one
// line per 10 s with how many it stands for), and the poll loop pauses after a poll that returned
// only errors, up to a second, so a failing partition costs neither a log line nor a spin per
// fetch.
//
// The package is one type split into files by concern: consume.go (configuration and the
// lifecycle: New, Start, Stop and its drain), schedule.go (fetched records into session queues,
// starts up to the in-flight limit, a turn's end), fair.go (the fair order between tenants,
// priorities, the limiter), heap.go (a tenant's ready sessions of a partition by priority and
// offset), defer.go (deferred records and their retry), flow.go (per-partition fetch pauses),
// rebalance.go (assignments, revokes and losses), commit.go (offset commits), recover.go (a new
// topic incarnation, lost records, repeated errors) and waiting.go (the first assignment, for
// readiness).
package consume
