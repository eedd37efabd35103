package consume

import (
	"time"
)

// requeueDeferredLocked puts s's deferred records back at the head of its queue, in offset order
// (they were accepted before what is queued behind them), and resets the retry pause.
func (c *Consumer) requeueDeferredLocked(s *session) {
	s.queue = append(s.deferred, s.queue...)
	s.deferred = nil
	stopRetry(s)
	s.pause = 0
}

// armRetryLocked schedules the next try of s's deferred records while nothing of the session runs
// here: one timer per session, whose pause doubles from DeferPauseFirst to DeferPauseLongest.
func (c *Consumer) armRetryLocked(s *session) {
	stopRetry(s)
	s.pause = min(max(2*s.pause, DeferPauseFirst), DeferPauseLongest)
	s.retry = time.AfterFunc(s.pause, func() { c.retryDeferred(s) })
}

// stopRetry stops s's retry timer, if any.
func stopRetry(s *session) {
	if s.retry != nil {
		s.retry.Stop()
		s.retry = nil
	}
}

// retryDeferred hands s's deferred records to the handler again, unless the session runs or was
// forgotten meanwhile, or the consumer is closing.
func (c *Consumer) retryDeferred(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.retry = nil
	ps := c.parts[s.sk.part]
	if c.closing || s.running || len(s.deferred) == 0 || ps == nil || c.sessions[s.sk] != s {
		return
	}
	pause := s.pause
	c.requeueDeferredLocked(s)
	s.pause = pause // still nothing else ran: the next pause keeps growing
	c.readyLocked(s, ps)
	c.scheduleLocked()
}
