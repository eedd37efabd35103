package deadletter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

const topic = "turns.dlq"

func cluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func TestProducer(t *testing.T) {
	t.Parallel()

	t.Run("WritesWhileRunning", func(t *testing.T) {
		t.Parallel()
		brokers := cluster(t)
		p := New(brokers)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rec := &kgo.Record{
			Topic: topic, Key: []byte("s1"), Value: []byte("poison"),
			Headers: []kgo.RecordHeader{{Key: "turnstile-dlq-reason", Value: []byte("undecodable")}},
		}
		require.ErrorIs(t, p.DeadLetter(ctx, rec), ErrNotRunning, "before Start")

		require.NoError(t, p.Start(ctx))
		require.NoError(t, p.DeadLetter(ctx, rec))
		require.NoError(t, p.Stop(ctx))
		require.ErrorIs(t, p.DeadLetter(ctx, rec), ErrNotRunning, "after Stop")

		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		fetches := cl.PollRecords(ctx, 1)
		require.NoError(t, fetches.Err())
		got := fetches.Records()
		require.Len(t, got, 1)
		require.Equal(t, "s1", string(got[0].Key))
		require.Equal(t, "poison", string(got[0].Value))
		require.Equal(t, []kgo.RecordHeader{{Key: "turnstile-dlq-reason", Value: []byte("undecodable")}}, got[0].Headers)
	})

	t.Run("WritesToARecreatedTopic", func(t *testing.T) {
		// The dead-letter topic deleted and created again (a restarted embedded broker does the
		// same): the client refuses the new incarnation until the topic is purged from it.
		t.Parallel()
		brokers := cluster(t)
		p := New(brokers)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, p.Start(ctx))
		defer func() { require.NoError(t, p.Stop(ctx)) }()
		require.NoError(t, p.DeadLetter(ctx, &kgo.Record{Topic: topic, Value: []byte("before")}))

		admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		require.NoError(t, err)
		defer admCl.Close()
		adm := kadm.NewClient(admCl)
		del, err := adm.DeleteTopics(ctx, topic)
		require.NoError(t, err)
		require.NoError(t, del.Error())
		created, err := adm.CreateTopic(ctx, 1, -1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		require.NoError(t, p.DeadLetter(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, New(cluster(t)), lifecycletest.Options{})
	})
}
