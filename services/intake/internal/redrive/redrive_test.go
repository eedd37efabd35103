package redrive

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

type bundle struct {
	env    *testenv.Env
	client *kgo.Client
	store  *turnstore.Store
	reg    *prometheus.Registry
}

func setup(t *testing.T, cfg Config) (*Redriver, *bundle) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	client, err := kafka.NewClient(kafka.ProducerOpts(env.Config.BrokerList())...)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	cfg.Topic = env.Config.Topic
	reg := prometheus.NewRegistry()
	pub := streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 1000, time.Hour)
	return New(cfg, env.Pool, client, pub, env.Log, reg), &bundle{env: env, client: client, store: turnstore.New(env.Pool), reg: reg}
}

// queued records a queued turn of session (a key) as intake's recorder would: its record at
// partition 0, offset off, of the topic whose ID is topic.
func (b *bundle) queued(t *testing.T, session string, accepted, deadline time.Time, off int64, topic uuid.UUID) uuid.UUID {
	t.Helper()
	return b.queuedAt(t, session, accepted, deadline, 0, off, topic)
}

// queuedAt is queued with the record at partition part.
func (b *bundle) queuedAt(t *testing.T, session string, accepted, deadline time.Time, part int32, off int64, topic uuid.UUID) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	_, err := b.store.InsertQueued(context.Background(), &turnstore.QueuedParams{
		TurnIDs: pgarray.UUIDs{pgarray.UUID(id)}, SessionKeys: pgarray.Texts{pgarray.Text(session)},
		Tenants: pgarray.Texts{pgarray.Text(wire.DefaultTenant)}, AcceptedAt: pgarray.Times{pgarray.Time(accepted)},
		Deadlines: pgarray.Times{pgarray.Time(deadline)}, NeedSession: pgarray.Bools{false},
		ClientTurnIDs: []*uuid.UUID{nil}, Inputs: pgarray.Texts{pgarray.Text("say " + id.String())},
		Metadata: [][]byte{[]byte(`{"n":1}`)}, Multitasks: []*string{nil}, Traceparents: []*string{&tp},
		Partitions: pgarray.Ints{pgarray.Int(part)}, Offsets: pgarray.Ints{pgarray.Int(off)}, TopicIDs: []*uuid.UUID{&topic},
	})
	require.NoError(t, err)
	return id
}

func TestRedriverDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}
	c.applyDefaults()
	require.Equal(t, []string{agents.DefaultName}, c.Agents().Names(), "one default agent")
	c.Agents = nil
	require.Equal(t, Config{
		Interval: config.RedriveIntervalDefault, Grace: GraceDefault, UnknownAfter: UnknownAfterDefault,
		Hold: HoldDefault, Batch: BatchDefault, ProduceTimeout: config.ProduceTimeoutDefault,
		Partitions: config.PartitionsDefault,
	}, c)
}

// TestRedriver checks one round against a real broker: the turns of an older incarnation of the
// topic (a restarted embedded broker) are produced again, in acceptance order, with what their
// records held, and their rows learn where the new records went; a turn whose record is still
// there is left alone; an orphan is failed and counted; a turn past its deadline expires, with
// its turn.expired published.
func TestRedriver(t *testing.T) {
	t.Parallel()
	r, b := setup(t, Config{})
	ctx := context.Background()
	require.NoError(t, r.ReadTopic(ctx))
	current := r.TopicID(b.env.Config.Topic)
	require.NotEqual(t, uuid.Nil, current, "kfake reports the topic's ID")

	now := time.Now()
	older := uuid.New()
	s := wire.NewSessionKey(wire.DefaultTenant, "s").String()
	second := b.queued(t, s, now.Add(-2*time.Second), now.Add(time.Hour), 7, older)
	first := b.queued(t, s, now.Add(-3*time.Second), now.Add(time.Hour), 6, older)
	x, err := b.client.ProduceSync(ctx, &kgo.Record{Topic: b.env.Config.Topic, Value: []byte("x")}).First()
	require.NoError(t, err)
	kept := b.queuedAt(t, wire.NewSessionKey(wire.DefaultTenant, "k").String(), now.Add(-time.Minute), now.Add(time.Hour), x.Partition, x.Offset, current)
	late := b.queued(t, wire.NewSessionKey(wire.DefaultTenant, "late").String(), now.Add(-time.Hour), now.Add(-time.Minute), 1, older)
	orphan := uuid.Must(uuid.NewV7())
	_, err = b.env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
		VALUES ($1, $2, 'default', 'queued', now() - interval '1 hour', now() + interval '1 hour')`, orphan, wire.NewSessionKey(wire.DefaultTenant, "o").String())
	require.NoError(t, err)

	res := r.Round(ctx)
	require.Equal(t, Result{Redriven: 2, Orphans: 1, Expired: 1, TopicRead: true}, res)
	require.InDelta(t, 2, testutil.ToFloat64(r.redriven), 0)
	require.InDelta(t, 1, testutil.ToFloat64(r.orphans), 0)

	// The re-driven records, in acceptance order, as intake wrote them.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.env.Config.BrokerList()...), kgo.ConsumeTopics(b.env.Config.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var envs []wire.Envelope
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(envs) < 2 && pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(rec *kgo.Record) {
			if string(rec.Value) == "x" {
				return
			}
			e, err := wire.DecodeEnvelope(rec.Value)
			require.NoError(t, err)
			require.Equal(t, s, string(rec.Key))
			require.Len(t, rec.Headers, 1)
			require.Equal(t, "traceparent", rec.Headers[0].Key)
			envs = append(envs, e)
		})
	}
	require.Len(t, envs, 2)
	require.Equal(t, []uuid.UUID{first, second}, []uuid.UUID{envs[0].TurnID, envs[1].TurnID}, "acceptance order")
	require.Equal(t, "say "+first.String(), envs[0].Input.Text)
	require.Equal(t, "s", envs[0].SessionID)
	require.Equal(t, map[string]any{"n": float64(1)}, envs[0].Metadata)

	var topicID uuid.UUID
	var redrives int
	require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT kafka_topic_id, redrives FROM turns WHERE turn_id = $1`, first).Scan(&topicID, &redrives))
	require.Equal(t, current, topicID, "the row knows where its new record went")
	require.Equal(t, 1, redrives)
	for id, want := range map[uuid.UUID]wire.Status{kept: wire.StatusQueued, late: wire.StatusExpired, orphan: wire.StatusFailed} {
		tr, err := b.store.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, tr.Status, id)
	}
	tr, err := b.store.Get(ctx, orphan)
	require.NoError(t, err)
	require.Equal(t, OrphanError, tr.Error)
	entries, err := streams.NewReader(b.env.Redis, b.env.Config.KeyPrefix).After(ctx, wire.NewSessionKey(wire.DefaultTenant, "late"), streams.EntryID{}, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1, "turn.expired is published")

	require.Equal(t, Result{TopicRead: true}, r.Round(ctx), "a second round finds nothing to do")

	// Retention: records below the start offset are gone.
	adm := kadm.NewClient(b.client)
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{b.env.Config.Topic: {x.Partition: {At: x.Offset + 1}}})
	require.NoError(t, err)
	require.NoError(t, dr.Error())
	res = r.Round(ctx)
	require.Equal(t, 1, res.Redriven, "the turn whose record retention removed is re-driven")
	var moved int64
	require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT redrives FROM turns WHERE turn_id = $1`, kept).Scan(&moved))
	require.EqualValues(t, 1, moved)
}

func TestRedriverLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		r, _ := setup(t, Config{Interval: 10 * time.Millisecond})
		lifecycletest.Stress(t, r, lifecycletest.Options{})
	})
}
