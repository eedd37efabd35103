package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// benchSessions spreads benchmark turns over this many sessions, so MaxInflight can be used.
const benchSessions = 256

// BenchmarkThroughput measures turns per second through the whole worker pipeline (Kafka fetch,
// scheduling, claim, the completion transaction, one fenced Redis publish of turn.started, one
// delta and turn.completed, offset commits) with an instant agent, next to a baseline that only sends
// the same claim and completion statements to the same Postgres with the same concurrency, in the
// same run. The ratio pipeline/baseline is what the worker keeps of the database's own speed.
func BenchmarkThroughput(b *testing.B) {
	env := testenv.New(b, testenv.Options{Partitions: 8})
	cfg := env.Config
	cfg.Roles = "worker"
	cfg.DemoDelay = time.Nanosecond // the instant agent: one delta, no pause worth the name
	cfg.Migrate = "off"
	ctx := context.Background()
	b.ReportAllocs()

	// The baseline: claim and complete, pgbench style, MaxInflight clients at once.
	store := lease.NewStore(env.Pool, "baseline", cfg.LeaseTTL, cfg.MaxAttempts)
	// It runs half its turns before the pipeline and half after, so drift in the machine's load
	// (shared CI runners) hits both sides alike.
	runBaseline := func(kind string) float64 {
		return runParallel(b, max(b.N/2, 1), cfg.MaxInflight, func(i int) {
			e := benchEnvelope(i, kind)
			c, err := store.Claim(ctx, lease.ClaimRequest{Env: e})
			if err != nil || c.Outcome != turnstore.ClaimAcquired {
				b.Errorf("baseline claim: %v %v", c.Outcome, err)
				return
			}
			if err := store.Complete(ctx, e.TurnID, c.Token, wire.Output{Text: "ok"}); err != nil {
				b.Errorf("baseline complete: %v", err)
			}
		})
	}
	baseline1 := runBaseline("baseline1")

	// The pipeline.
	deps := app.NewDeps(cfg, env.Log)
	defer deps.Close()
	w, err := New(ctx, deps)
	require.NoError(b, err)
	var finished atomic.Int64
	done := make(chan struct{})
	var target atomic.Int64
	target.Store(int64(cfg.Partitions))
	w.lanes[0].consumer.OnFinish(func() {
		if finished.Add(1) == target.Load() {
			done <- struct{}{}
		}
	})
	require.NoError(b, w.Start(ctx))
	defer func() { require.NoError(b, w.Stop(ctx)) }()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cfg.BrokerList()...), kgo.DefaultProduceTopic(cfg.Topic))
	require.NoError(b, err)
	defer producer.Close()
	// Warm up: the group is joined and every partition assigned once one record per partition is done.
	for p := range cfg.Partitions {
		produceEnvelope(b, producer, benchEnvelope(p, "warmup"))
	}
	<-done
	target.Store(int64(cfg.Partitions + b.N))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		e := benchEnvelope(i, "pipeline")
		v, err := e.Encode()
		require.NoError(b, err)
		producer.Produce(ctx, &kgo.Record{Key: []byte(e.SessionID), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Errorf("produce: %v", err)
			}
		})
	}
	<-done
	pipeline := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	baseline := (baseline1 + runBaseline("baseline2")) / 2
	b.ReportMetric(pipeline, "turns/s")
	b.ReportMetric(baseline, "baseline-turns/s")
	b.ReportMetric(pipeline/baseline, "ratio")
	// How large the group-commit batches grew, and how long their round trips took.
	fams, err := deps.Registry.Gather()
	require.NoError(b, err)
	for _, f := range fams {
		name := f.GetName()
		if name != "turnstile_worker_batch_size" && name != "turnstile_worker_batch_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h.GetSampleCount() == 0 {
				continue
			}
			kind := m.GetLabel()[0].GetValue()
			mean := h.GetSampleSum() / float64(h.GetSampleCount())
			if name == "turnstile_worker_batch_size" {
				b.ReportMetric(mean, kind+"s/batch")
			} else {
				b.ReportMetric(mean*1000, kind+"-batch-ms")
			}
		}
	}
}

func benchEnvelope(i int, kind string) wire.Envelope {
	now := time.Now()
	return wire.Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: fmt.Sprintf("%s-%d", kind, i%benchSessions),
		Tenant: "default", Input: wire.Input{Text: "hi"}, Metadata: map[string]any{"demo": map[string]any{"tokens": 1}},
		Deadline: now.Add(time.Hour), AcceptedAt: now,
	}
}

func produceEnvelope(b *testing.B, cl *kgo.Client, e wire.Envelope) {
	v, err := e.Encode()
	require.NoError(b, err)
	require.NoError(b, cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(e.SessionID), Value: v}).FirstErr())
}

// runParallel runs f(0..n-1) on workers goroutines and returns calls per second.
func runParallel(b *testing.B, n, workers int, f func(i int)) float64 {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
