package consume

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/services/worker/internal/offsets"
)

// assignmentChangedLocked rebuilds the round-robin order and the shares after partitions came or
// went.
func (c *Consumer) assignmentChangedLocked() {
	c.order = c.order[:0]
	for _, ps := range c.parts {
		c.order = append(c.order, ps)
	}
	slices.SortFunc(c.order, func(a, b *partState) int {
		return cmp.Or(strings.Compare(a.pk.topic, b.pk.topic), cmp.Compare(a.pk.part, b.pk.part))
	})
	c.next = 0
	n := max(len(c.order), 1)
	c.bufferedShare = max((c.cfg.MaxBuffered+n-1)/n, 1)
	c.heldShare = max((c.cfg.MaxHeld+n-1)/n, 1)
	c.pauseLocked()
}

func (c *Consumer) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// Start each partition's tracker at its committed offset (or wherever the client will start).
	committed := cl.CommittedOffsets()
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, parts := range assigned {
		for _, p := range parts {
			start := int64(-1) // unknown until the first record: nothing is committed before it
			if eo, ok := committed[topic][p]; ok && eo.Offset >= 0 {
				start = eo.Offset
			}
			c.gen++
			pk := partKey{topic, p}
			c.parts[pk] = &partState{pk: pk, tracker: offsets.New(start), epoch: -1, gen: c.gen}
		}
	}
	c.assignmentChangedLocked()
	if len(assigned[c.cfg.Topic]) > 0 {
		c.recovery().assignedTopic()
	}
	if !c.joined.Swap(true) {
		c.log.Info("joined the group", "group", c.cfg.Group)
	}
	c.log.Info("partitions assigned", "partitions", assigned)
}

func (c *Consumer) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	c.commitPartitions(ctx, revoked)
	c.forget(revoked)
	c.log.Info("partitions revoked", "partitions", revoked)
}

func (c *Consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.forget(lost)
	c.log.Warn("partitions lost", "partitions", lost)
}

// forget drops the partitions' trackers and their records that have not started.
func (c *Consumer) forget(parts map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	drop := map[partKey]bool{}
	var resume map[string][]int32
	for topic, ps := range parts {
		for _, p := range ps {
			pk := partKey{topic, p}
			drop[pk] = true
			// A pause outlives the assignment in the client: lift it, so the partition is fetched
			// if it comes back. Its ready sessions go with its state.
			if st := c.parts[pk]; st != nil && st.paused {
				resume = addPart(resume, pk)
			}
			delete(c.parts, pk)
		}
	}
	if resume != nil && c.client != nil {
		c.client.ResumeFetchPartitions(resume)
	}
	for _, t := range c.tenants {
		t.forgetPartsLocked(drop)
		if t.ready == 0 {
			c.active.remove(t)
		}
	}
	for sk, s := range c.sessions {
		if drop[sk.part] {
			s.queue, s.deferred = nil, nil
			stopRetry(s)
			if !s.running {
				c.deleteSessionLocked(s)
			}
		}
	}
	c.assignmentChangedLocked()
}
