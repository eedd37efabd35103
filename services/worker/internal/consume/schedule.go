package consume

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/services/worker/internal/offsets"
)

type partKey struct {
	topic string
	part  int32
}

type partState struct {
	pk      partKey
	tracker *offsets.Tracker
	epoch   int32
	// gen changes when the partition is revoked, so completions of turns fetched under an earlier
	// assignment do not touch a later one's tracker.
	gen uint64
	// ready counts the partition's sessions whose head record could start now (held in their
	// tenants' heaps; a stale entry counts until it is popped).
	ready int
	// held counts the partition's fetched records that have not started.
	held int
	// paused is whether the partition's fetching is paused.
	paused bool
}

type sessionKey struct {
	part partKey
	key  string
}

// session is one session's records in this consumer. The ready heaps and the running turns hold it
// by pointer, so starting a record and finishing it need no lookup of the session map (its keys a
// topic, a partition and a session ID) on the hot path. A session leaves the map (sessions) when
// nothing of it is queued or running; a pointer to it held elsewhere then has an empty queue and
// is never started again.
type session struct {
	sk      sessionKey
	tenant  *tenant
	running bool
	queue   []queued
	// deferred are records the handler deferred (Defer), oldest first: held, uncommitted, and
	// put back at the head of queue when a record of the session ends or retry fires. pause is
	// retry's next pause.
	deferred []queued
	retry    *time.Timer
	pause    time.Duration
}

// readySession is a ready session and the offset and priority of its head record.
type readySession struct {
	s      *session
	offset int64
	prio   int8
}

type queued struct {
	rec  *kgo.Record
	gen  uint64
	prio int8
	// announced: the record was announced as waiting for its tenant's limit.
	announced bool
}

// pollLoop takes every fetched record as soon as it arrives. The client hands out a fetch partition
// by partition, so taking a few records at a time would serve one partition's fetched records
// before the next partition's; holding all of them lets the scheduler take turns between
// partitions. What is held stays bounded by the partitions' pauses (pauseLocked): a paused
// partition is not fetched, and PollRecords blocks while every partition is paused.
func (c *Consumer) pollLoop(ctx context.Context, cl *kgo.Client) {
	c.log.Info("waiting for a group assignment; a dead member's partitions move when its session times out",
		"group", c.cfg.Group, "session_timeout", c.sessionTimeout())
	var pe pollErrors
	for {
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing || ctx.Err() != nil {
			return
		}
		fetches := cl.PollRecords(ctx, 0)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return
		}
		follow := c.noteErrors(ctx, fetches)
		c.mu.Lock()
		fetches.EachRecord(c.addLocked)
		c.scheduleLocked()
		c.mu.Unlock()
		cl.AllowRebalance()
		if follow {
			c.followIncarnation(ctx, cl)
		}
		if !pe.wait(ctx, fetches) {
			return
		}
	}
}

// addLocked queues a fetched record behind its session.
func (c *Consumer) addLocked(rec *kgo.Record) {
	pk := partKey{rec.Topic, rec.Partition}
	ps := c.parts[pk]
	if ps == nil {
		// A record for a partition we do not know as assigned: assigned() always runs first, so this
		// only happens for a partition revoked between fetch and now. Leave it to its new owner.
		return
	}
	if !ps.tracker.Add(rec.Offset) {
		return
	}
	ps.epoch = rec.LeaderEpoch
	sk := sessionKey{pk, string(rec.Key)}
	s := c.sessions[sk]
	if s == nil {
		s = &session{sk: sk, tenant: c.tenantOfLocked(rec.Key)}
		s.tenant.sessions++
		c.sessions[sk] = s
	}
	s.queue = append(s.queue, queued{rec: rec, gen: ps.gen, prio: c.priorityOf(rec)})
	ps.held++
	if !s.running && len(s.queue) == 1 {
		c.readyLocked(s, ps)
	}
}

// scheduleLocked starts ready sessions' head records up to the in-flight limit, taking turns
// between partitions: each pass over the partitions starts at most one record of each, so no
// partition's backlog waits while another's is worked off.
func (c *Consumer) scheduleLocked() {
	for {
		s, q, ok := c.takeLocked()
		if !ok {
			break
		}
		c.turns.Add(1)
		go c.run(c.turnsCtx, s, q)
	}
	c.pauseLocked()
}

// takeLocked takes the head record of the next ready session if the in-flight limit lets it start,
// and marks the session running.
func (c *Consumer) takeLocked() (*session, queued, bool) {
	if c.closing || c.inflight >= c.maxInflight {
		return nil, queued{}, false
	}
	s, ps := c.nextReadyLocked()
	if ps == nil {
		return nil, queued{}, false
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	s.running = true
	c.inflight++
	ps.held--
	return s, q, true
}

// run handles q, a record of session s, and then every record that may start when the one before
// it ends, until none may.
func (c *Consumer) run(ctx context.Context, s *session, q queued) {
	defer c.turns.Done()
	for {
		res := c.handle(ctx, q.rec)
		c.mu.Lock()
		c.finishLocked(s, q, res)
		// The goroutine goes on with the next record that may start, rather than ending while another
		// one is started: a turn's call depth grows a fresh goroutine's stack several times, a copy
		// each time, and a goroutine that stays keeps the stack it has grown.
		next, nextQ, more := c.takeLocked()
		c.scheduleLocked()
		c.mu.Unlock()
		if c.onFinish != nil {
			c.onFinish()
		}
		if !more {
			return
		}
		s, q = next, nextQ
	}
}

// finishLocked records the end of a record's turn: its offset may be committed (if it finished
// under the partition's current assignment) and its session's next record becomes ready. A deferred
// record is held back (see Defer), and the session's deferred records go back to the head of its
// queue when any other of its records ends.
func (c *Consumer) finishLocked(s *session, q queued, res Result) {
	c.inflight--
	c.endedLocked(s.tenant)
	ps := c.parts[s.sk.part]
	if ps != nil && ps.gen == q.gen && res == Commit {
		ps.tracker.Done(q.rec.Offset)
	}
	s.running = false
	if res == Defer {
		if ps == nil || ps.gen != q.gen {
			// Revoked meanwhile: the next owner reads it again from the committed offset.
			c.dropEmptyLocked(s)
			return
		}
		s.deferred = append(s.deferred, q)
		ps.held++
		if len(s.queue) > 0 {
			c.readyLocked(s, ps)
			return
		}
		c.armRetryLocked(s)
		return
	}
	if len(s.deferred) > 0 && res == Commit {
		c.requeueDeferredLocked(s)
	}
	// Queued records belong to the partition's current assignment: forget empties the queues of
	// a revoked partition, so a non-empty queue has a partition state.
	switch {
	case res == HandOff:
		// Draining: the session's later records must not start before this one, which is now
		// someone else's; drop them so the next owner runs them in order.
		if ps != nil {
			ps.held -= len(s.queue) + len(s.deferred)
		}
		s.queue, s.deferred = nil, nil
		stopRetry(s)
		c.deleteSessionLocked(s)
	case len(s.queue) == 0:
		c.dropEmptyLocked(s)
	default:
		c.readyLocked(s, ps)
	}
}

// dropEmptyLocked removes s from the session map when nothing of it is queued, deferred or running.
func (c *Consumer) dropEmptyLocked(s *session) {
	if len(s.queue) == 0 && len(s.deferred) == 0 && !s.running {
		stopRetry(s)
		c.deleteSessionLocked(s)
	}
}

// deleteSessionLocked removes s from the session map, and its tenant with its last session.
func (c *Consumer) deleteSessionLocked(s *session) {
	if c.sessions[s.sk] != s {
		return
	}
	delete(c.sessions, s.sk)
	t := s.tenant
	t.sessions--
	if t.sessions == 0 {
		c.active.remove(t)
		if c.tenants[t.name] == t {
			delete(c.tenants, t.name)
		}
	}
}
