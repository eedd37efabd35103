package consume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// commitOffsets collects the commit points that moved.
func (c *Consumer) commitOffsets(only map[string][]int32) (*kgo.Client, map[string]map[int32]kgo.EpochOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := func(pk partKey) bool {
		if only == nil {
			return true
		}
		for _, p := range only[pk.topic] {
			if p == pk.part {
				return true
			}
		}
		return false
	}
	out := map[string]map[int32]kgo.EpochOffset{}
	for pk, ps := range c.parts {
		if !want(pk) {
			continue
		}
		if p, moved := ps.tracker.Commit(); moved {
			if out[pk.topic] == nil {
				out[pk.topic] = map[int32]kgo.EpochOffset{}
			}
			out[pk.topic][pk.part] = kgo.EpochOffset{Epoch: ps.epoch, Offset: p}
		}
	}
	return c.client, out
}

func (c *Consumer) commitPartitions(ctx context.Context, only map[string][]int32) {
	cl, offs := c.commitOffsets(only)
	if cl == nil || len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var commitErr error
	cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitRespErr(resp)
		}
	})
	if commitErr != nil {
		c.recovery().commitLog.Log(ctx, commitErr.Error(), slog.Any("err", commitErr))
		c.resetCommitted(offs)
		if kafka.NewIncarnation(commitErr) {
			// The client refuses to commit an old incarnation's offsets to a new one: the
			// first sign of a recreated topic, often well before a fetch reports it.
			c.followIncarnation(ctx, cl)
		}
	}
}

func commitRespErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// resetCommitted forgets that offs were committed, so the next round tries again.
func (c *Consumer) resetCommitted(offs map[string]map[int32]kgo.EpochOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range offs {
		for p := range ps {
			if st := c.parts[partKey{topic, p}]; st != nil {
				st.tracker.ForgetCommit()
			}
		}
	}
}

func (c *Consumer) commitLoop(ctx context.Context) {
	lifecycle.Every(ctx, c.cfg.CommitInterval, func(ctx context.Context) { c.commitPartitions(ctx, nil) })
}
