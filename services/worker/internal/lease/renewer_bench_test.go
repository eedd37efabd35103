package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// statementCounter is a pgx tracer that counts the statements a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// BenchmarkLeaseRenewal holds 1,000 running turns and measures one renewal round of the worker's
// renewer: the Postgres statements it sends (counted by a tracer on the pool) and how long it takes.
// With one statement per round, a worker spends 1/heartbeat statements per second on renewal whatever
// its number of turns in flight.
func BenchmarkLeaseRenewal(b *testing.B) {
	const inflight = 1000
	env := testenv.New(b, testenv.Options{Partitions: 1})
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(env.Config.DatabaseURL)
	require.NoError(b, err)
	pcfg.ConnConfig.RuntimeParams["search_path"] = env.Config.DatabaseSchema
	counter := &statementCounter{}
	pcfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(b, err)
	defer pool.Close()

	store := NewStore(pool, "bench", time.Minute, 3)
	r := NewRenewer(store, env.Config.Heartbeat, env.Log)
	// The leases are taken in one statement: the claims themselves are not what is measured.
	rows, err := pool.Query(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, fencing_token,
			lease_owner, lease_expires_at, accepted_at)
		SELECT gen_random_uuid(), 'renew', 'default', 'running', 1, nextval('fencing_token_seq'), 'bench',
			now() + interval '1 minute', now()
		FROM generate_series(1, $1)
		RETURNING turn_id, fencing_token`, inflight)
	require.NoError(b, err)
	held, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Held])
	require.NoError(b, err)
	for _, h := range held {
		r.Track(h.TurnID, h.Token, time.Now(), func(error) {})
	}
	renewed := 0
	r.OnRenew = func(n int, err error) {
		if err != nil {
			b.Errorf("renew: %v", err)
		}
		renewed += n
	}
	b.ReportAllocs()
	before := counter.n.Load()
	b.ResetTimer()
	for range b.N {
		r.renewOnce(ctx)
	}
	b.StopTimer()
	stmts := float64(counter.n.Load()-before) / float64(b.N)
	require.Equal(b, inflight*b.N, renewed)
	require.Equal(b, inflight, r.Held(), "every lease is still held")
	b.ReportMetric(stmts, "stmts/heartbeat")
	b.ReportMetric(stmts/config3s.Seconds(), "stmts/s@3s-heartbeat")
	b.ReportMetric(inflight, "leases")
}

// config3s is the default heartbeat interval (TURNSTILE_HEARTBEAT_INTERVAL).
const config3s = 3 * time.Second
