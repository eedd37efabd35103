package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/services/worker/internal/offsets"
)

const (
	// repeatedErrorEvery is how often a fetch or commit error that keeps coming is logged: its
	// first occurrence at once, then one line per interval saying how many it stands for.
	repeatedErrorEvery = 10 * time.Second
	// followEvery is the least time between two purges of the topic (followIncarnation): a fresh
	// incarnation can answer UNKNOWN_TOPIC_ID for a moment while its partitions' leaders learn of
	// it, and each purge costs the group a rebalance.
	followEvery = 2 * time.Second
	// errorPauseFirst and errorPauseLongest bound the pause after a poll that returned errors and
	// no record: the client answers a poll at once while a partition fails, so without a pause
	// the loop would spin at the speed of the poll.
	errorPauseFirst   = 50 * time.Millisecond
	errorPauseLongest = time.Second
)

// recovery is what the consumer keeps to get over a broker's faults by itself: the rate-limited
// logs of errors that repeat, and when the topic was last purged (followIncarnation), which both
// the poll loop and the commit loop may ask for.
type recovery struct {
	once      sync.Once
	fetchLog  *logging.Repeated
	commitLog *logging.Repeated

	// assigned is signalled when partitions of the topic were assigned (incarnationLoop).
	assigned chan struct{}

	mu       sync.Mutex
	followed time.Time
	// topicID is the topic's ID as the last check saw it, zero when unknown (incarnationLoop).
	topicID [16]byte
}

// assignedTopic signals incarnationLoop that partitions of the topic were assigned.
func (r *recovery) assignedTopic() {
	select {
	case r.assigned <- struct{}{}:
	default:
	}
}

// recovery returns the consumer's recovery state, its logs writing to the consumer's logger.
func (c *Consumer) recovery() *recovery {
	r := &c.rec
	r.once.Do(func() {
		r.fetchLog = logging.NewRepeated(c.log, slog.LevelWarn, "fetch error", repeatedErrorEvery)
		r.commitLog = logging.NewRepeated(c.log, slog.LevelWarn, "offset commit failed; it will be retried", repeatedErrorEvery)
		r.assigned = make(chan struct{}, 1)
	})
	return r
}

// pollErrors is the poll loop's pause after polls that returned only errors.
type pollErrors struct {
	pause time.Duration
}

// noteErrors logs fetches' errors, each kind with a rate limit, and reports whether one of them
// says that the client holds an old incarnation of the consumer's topic. It also starts afresh
// each partition whose records the broker lost, where the client resumes it.
func (c *Consumer) noteErrors(ctx context.Context, fetches kgo.Fetches) (follow bool) {
	log := c.recovery().fetchLog
	fetches.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		log.Log(ctx, topic+"\x00"+err.Error(), slog.String("topic", topic), slog.Int("partition", int(part)), slog.Any("err", err))
		if topic == c.cfg.Topic && kafka.NewIncarnation(err) {
			follow = true
		}
		if dl := (*kgo.ErrDataLoss)(nil); errors.As(err, &dl) && dl.Topic == c.cfg.Topic {
			c.restartPartition(partKey{dl.Topic, dl.Partition}, dl.ResetTo)
		}
	})
	return follow
}

// wait pauses after a poll that returned errors and no record, longer each time such polls follow
// one another; it reports false when ctx ended first.
func (pe *pollErrors) wait(ctx context.Context, fetches kgo.Fetches) bool {
	failed := false
	fetches.EachError(func(_ string, _ int32, err error) {
		failed = failed || !errors.Is(err, context.Canceled)
	})
	if !failed || fetches.NumRecords() > 0 {
		pe.pause = 0
		return true
	}
	pe.pause = min(max(2*pe.pause, errorPauseFirst), errorPauseLongest)
	t := time.NewTimer(pe.pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// followIncarnation makes the client consume the incarnation of the topic the brokers hold now. The
// client never moves to a new incarnation by itself (franz-go's README, "Topic recreation": it
// cannot tell an adopted ID's log from a truncated one); purging the topic from the client and
// adding it back is the documented way on. The group then assigns the topic's partitions afresh,
// consumed from the group's committed offsets: none for a recreated topic (its offsets went with
// it) or a restarted embedded broker (it lost them), so from the start.
//
// The partitions' states go first, without a commit: their offsets are the old incarnation's, and
// committed to the new one they would skip its records. Records fetched and not started are
// dropped: their records are gone with the old incarnation, and intake's re-driver produces them
// again from Postgres (package redrive). Turns running finish under their leases; their offsets are
// not committed (they belong to an earlier assignment).
func (c *Consumer) followIncarnation(ctx context.Context, cl *kgo.Client) {
	r := c.recovery()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.followed) < followEvery {
		return
	}
	r.followed = now
	r.topicID = [16]byte{} // the next check after the re-add records the new incarnation's
	topic := c.cfg.Topic
	c.mu.Lock()
	var parts []int32
	for pk := range c.parts {
		if pk.topic == topic {
			parts = append(parts, pk.part)
		}
	}
	c.mu.Unlock()
	if len(parts) > 0 {
		c.forget(map[string][]int32{topic: parts})
	}
	c.log.WarnContext(ctx, "the topic is a new incarnation (recreated, or the broker lost its state); "+
		"consuming it afresh: purged from the client and added back, its partitions are assigned again",
		"topic", topic, "partitions_dropped", len(parts))
	cl.PurgeTopicsFromConsuming(topic)
	cl.AddConsumeTopics(topic)
}

// incarnationLoop checks the topic's ID each time partitions of it were assigned, and follows a
// new incarnation at once when the ID changed since the last check. A broker that lost its state
// (the embedded one restarted) has lost the group too: the members rejoin and are assigned their
// partitions again, and this check sees the new incarnation then, where fetches would take about
// ten seconds to report it (the client retries them with a growing backoff first) and no commit is
// due while nothing is consumed.
func (c *Consumer) incarnationLoop(ctx context.Context, cl *kgo.Client) {
	r := c.recovery()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.assigned:
		}
		id, ok := c.topicID(ctx, cl)
		if !ok {
			continue
		}
		r.mu.Lock()
		old := r.topicID
		r.topicID = id
		r.mu.Unlock()
		if old != ([16]byte{}) && old != id {
			c.followIncarnation(ctx, cl)
		}
	}
}

// topicID asks the brokers for the topic's ID. The request goes to a broker, not to the client's
// metadata cache (kadm's Metadata would answer from it, with the incarnation the client holds).
func (c *Consumer) topicID(ctx context.Context, cl *kgo.Client) ([16]byte, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(c.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return [16]byte{}, false
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == c.cfg.Topic && t.ErrorCode == 0 && t.TopicID != ([16]byte{}) {
			return t.TopicID, true
		}
	}
	return [16]byte{}, false
}

// restartPartition starts the partition's state afresh at resumeAt, where the client resumes it
// after the broker lost records it had consumed (kgo.ErrDataLoss): its records from there on come
// again, so the ones held and not started are dropped, and the tracker, whose offsets the log no
// longer holds, is replaced. Turns running finish under their leases without a commit.
func (c *Consumer) restartPartition(pk partKey, resumeAt int64) {
	c.mu.Lock()
	_, ok := c.parts[pk]
	c.mu.Unlock()
	if !ok {
		return
	}
	c.forget(map[string][]int32{pk.topic: {pk.part}})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.parts[pk] = &partState{pk: pk, tracker: offsets.New(resumeAt), epoch: -1, gen: c.gen}
	c.assignmentChangedLocked()
	c.log.Warn("the broker lost records of a partition; consuming it again from where the client resumes",
		"topic", pk.topic, "partition", pk.part, "resume_at", resumeAt)
}
