package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProducerOpts are the options every turnstile producer uses: every in-sync replica acknowledges a
// record before it counts as written, and the producer is idempotent so its own retries never
// duplicate a record. Records are partitioned by key hash, so a session's turns share a partition.
func ProducerOpts(brokers []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
}

// NewClient creates a franz-go client. It does not contact the brokers; the first request does.
func NewClient(opts ...kgo.Opt) (*kgo.Client, error) {
	c, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	return c, nil
}

// EnsureTopics creates the topics that do not exist yet with the given partition count. A topic that
// exists already is left as it is.
func EnsureTopics(ctx context.Context, brokers []string, partitions int32, topics ...string) error {
	cl, err := NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// WaitReachable retries EnsureTopics until it succeeds or ctx ends, so a role started beside the
// broker (or before it) does not fail on a race at start.
func WaitReachable(ctx context.Context, log *slog.Logger, brokers []string, partitions int32, topics ...string) error {
	delay := 100 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := EnsureTopics(attemptCtx, brokers, partitions, topics...)
		cancel()
		if err == nil {
			return nil
		}
		log.Warn("kafka not reachable yet", "brokers", brokers, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for kafka: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// NewIncarnation reports whether err, from a produce, fetch or commit, says that the client holds
// another incarnation of the topic than the brokers: the topic was deleted and recreated, or the
// embedded broker restarted and created it afresh, under a new topic ID. franz-go never moves to
// the new incarnation by itself: it fails the topic's records and fetches with UNKNOWN_TOPIC_ID
// (INCONSISTENT_TOPIC_ID in a fetch session) until the topic is purged from the client
// (PurgeTopicsFromProducing, or PurgeTopicsFromConsuming and AddConsumeTopics), after which it
// loads the incarnation of now.
func NewIncarnation(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID)
}
