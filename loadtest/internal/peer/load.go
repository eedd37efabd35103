package peer

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/kafka"
)

// LoadPoint is turnstile's no-op turns at a steady fraction of its capacity, beside the local
// Postgres server's CPU meanwhile: the cost per turn in the form peers publish it.
type LoadPoint struct {
	Fraction    float64 `json:"fraction_of_capacity"`
	Offered     float64 `json:"offered_per_sec"`
	TurnsPerSec float64 `json:"turns_per_sec"`
	// PostgresCores is the Postgres server's CPU time per second of the window (whole server: the
	// postmaster and every backend, exited ones included); PostgresShare the same as a share of
	// the machine's CPUs; PostgresPerTurn the same per turn finished, in microseconds.
	PostgresCores   float64 `json:"postgres_cores"`
	PostgresShare   float64 `json:"postgres_share_of_machine"`
	PostgresPerTurn float64 `json:"postgres_us_per_turn"`
	Seconds         float64 `json:"seconds"`
	Source          string  `json:"source"`
}

// AtCapacity is the LoadPoint of a turnstile drain (Turnstile): the queue drained as fast as the
// worker goes, which is its capacity.
func AtCapacity(r Result) LoadPoint {
	p := LoadPoint{Fraction: 1, TurnsPerSec: r.PerSec, Seconds: r.Seconds, Source: "the drain of the peer comparison (10%-90% window)"}
	if r.CPU.Postgres != nil {
		p.PostgresPerTurn = *r.CPU.Postgres
		p.PostgresCores = p.PostgresPerTurn * r.PerSec / 1e6
		p.PostgresShare = p.PostgresCores / float64(runtime.NumCPU())
	}
	p.Offered = r.PerSec
	return p
}

// loadWarmup is left out of a steady load's window: the worker's group join and first batches.
const loadWarmup = 3 * time.Second

// Steady runs turnstile's no-op turns (as Turnstile queues them) produced at rate per second for d
// to a worker that is already running, and reads the turns finished and the Postgres server's CPU
// over the window after loadWarmup.
func Steady(ctx context.Context, o Options, fraction, rate float64, d time.Duration) (LoadPoint, error) {
	p := LoadPoint{Fraction: fraction, Offered: rate, Source: fmt.Sprintf("turns produced to Kafka at a steady rate for %v, the first %v left out", d, loadWarmup)}
	st, err := startFront(ctx, o, "load")
	if err != nil {
		return p, err
	}
	defer func() { _ = st.Stop(context.WithoutCancel(ctx), false) }()
	if err := st.StartWorker(ctx, st.Config.InstanceID+"-w"); err != nil {
		return p, err
	}
	workers := st.WorkerMetrics()
	cl, err := kafka.NewClient(kafka.ProducerOpts(st.Config.BrokerList())...)
	if err != nil {
		return p, err
	}
	defer cl.Close()

	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	var cpu *cpuReader
	var c0 cpuTimes
	var t0 time.Time
	var n0, sent int
	for now := start; now.Sub(start) < d; now = <-t.C {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		if cpu == nil && now.Sub(start) >= loadWarmup {
			if n0, err = succeeded(workers); err != nil {
				return p, err
			}
			cpu, t0 = newCPUReader(), time.Now()
			c0 = cpu.read()
		}
		due := int(rate*now.Sub(start).Seconds()) - sent
		if due <= 0 {
			continue
		}
		envs := turnEnvelopes(sent, due, max(o.Sessions, 1<<20), now)
		recs := make([]*kgo.Record, len(envs))
		for i, env := range envs {
			v, err := env.Encode()
			if err != nil {
				return p, err
			}
			recs[i] = &kgo.Record{Topic: st.Config.Topic, Key: []byte(env.SessionKey().String()), Value: v}
		}
		// Produced without waiting, so a slow acknowledgement never delays the next tick.
		for _, r := range recs {
			cl.Produce(ctx, r, nil)
		}
		sent += due
	}
	if cpu == nil {
		return p, fmt.Errorf("steady load of %v is shorter than its warm-up %v", d, loadWarmup)
	}
	n1, err := succeeded(workers)
	if err != nil {
		return p, err
	}
	c1, t1 := cpu.read(), time.Now()
	secs := t1.Sub(t0).Seconds()
	p.Seconds, p.TurnsPerSec = secs, float64(n1-n0)/secs
	if c0.hasPostgres && c1.hasPostgres {
		p.PostgresCores = (c1.postgres - c0.postgres).Seconds() / secs
		p.PostgresShare = p.PostgresCores / float64(runtime.NumCPU())
		if n1 > n0 {
			p.PostgresPerTurn = (c1.postgres - c0.postgres).Seconds() * 1e6 / float64(n1-n0)
		}
	}
	return p, cl.Flush(ctx)
}

// LoadFractions are the fractions of capacity Loads measures below 100%.
var LoadFractions = []float64{0.25, 0.5}

// Loads is turnstile's Postgres CPU at LoadFractions of capacity (turns per second, the drain's
// rate), each for d, and at capacity from the drain itself (AtCapacity of drainResult).
func Loads(ctx context.Context, o Options, drainResult Result, d time.Duration) ([]LoadPoint, error) {
	var out []LoadPoint
	for _, f := range LoadFractions {
		p, err := Steady(ctx, o, f, f*drainResult.PerSec, d)
		if err != nil {
			return out, fmt.Errorf("steady load at %.0f%%: %w", 100*f, err)
		}
		out = append(out, p)
	}
	return append(out, AtCapacity(drainResult)), nil
}
