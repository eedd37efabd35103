package quota_test

import (
	"context"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/migrations"
	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// BenchmarkUsageTrigger measures what migration 00261's usage trigger cost the UPDATEs of turns
// that are not a completion, which 00310 spared them by counting usage in the completion statement:
// a lease renewal of 100 held turns (a worker's most frequent statement) and a one-row status
// change. The trigger is put back in this benchmark's own schema by 00310's Down section. Each
// round runs the statement perRound times with the trigger and with it disabled (ALTER TABLE …
// DISABLE TRIGGER: the schema as it is now), in alternating order,
// committed without waiting for the WAL flush (synchronous_commit off: the flush is the same
// either way and the noisiest part on a shared machine); the medians of the rounds are reported
// with their ratio.
func BenchmarkUsageTrigger(b *testing.B) {
	env := testenv.New(b, testenv.Options{Partitions: 1})
	s := turnstore.New(env.Pool)
	ctx := context.Background()
	const held = 100
	now := time.Now()
	p := turnstore.ClaimParams{
		TurnIDs: make(pgarray.UUIDs, held), SessionKeys: make(pgarray.Texts, held), Tenants: make(pgarray.Texts, held),
		Inputs: make(pgarray.Texts, held), Metadata: make([][]byte, held), AcceptedAt: make(pgarray.Times, held),
		Deadlines: make(pgarray.Times, held), Partitions: make(pgarray.Ints, held), Offsets: make(pgarray.Ints, held),
		Owner: "bench", TTL: time.Hour, MaxAttempts: 3, ClientTurnIDs: make([]*uuid.UUID, held),
	}
	for j := range held {
		p.TurnIDs[j] = pgarray.UUID(uuid.Must(uuid.NewV7()))
		p.SessionKeys[j] = pgarray.Text("acme/s" + strconv.Itoa(j))
		p.Tenants[j], p.Inputs[j] = "acme", "hi"
		p.AcceptedAt[j], p.Deadlines[j] = pgarray.Time(now), pgarray.Time(now.Add(24*time.Hour))
		p.Offsets[j] = pgarray.Int(j)
	}
	rows, err := s.ClaimTurns(ctx, &p)
	require.NoError(b, err)
	for _, r := range rows {
		require.Equal(b, turnstore.ClaimAcquired, r.Outcome)
	}
	one := uuid.UUID(p.TurnIDs[0])

	statements := []struct {
		name string
		sql  string
		args []any
	}{
		// renew.sql's update, without its fence check (the rows are this benchmark's).
		{"renew100", `UPDATE turns SET lease_expires_at = now() + interval '1 hour', updated_at = now()
WHERE turn_id = ANY($1) AND lease_owner IS NOT NULL`, []any{p.TurnIDs}},
		{"status1", `UPDATE turns SET status = 'running', updated_at = now() WHERE turn_id = $1`, []any{one}},
	}
	downSQL, err := fs.ReadFile(migrations.FS, "00310_usage_in_completion.sql")
	require.NoError(b, err)
	_, down, ok := strings.Cut(string(downSQL), "-- +goose Down")
	require.True(b, ok)
	conn, err := env.Pool.Acquire(ctx)
	require.NoError(b, err)
	_, err = conn.Conn().PgConn().Exec(ctx, down).ReadAll() // several statements: the simple protocol
	conn.Release()
	require.NoError(b, err)
	setTrigger := func(on bool) {
		verb := "DISABLE"
		if on {
			verb = "ENABLE"
		}
		_, err := env.Pool.Exec(ctx, `ALTER TABLE turns `+verb+` TRIGGER turns_count_usage`)
		require.NoError(b, err)
	}
	const rounds, perRound = 9, 100
	for _, st := range statements {
		b.Run(st.name, func(b *testing.B) {
			var with, without []float64
			for range b.N {
				with, without = with[:0], without[:0]
				for r := range rounds {
					for _, on := range []bool{r%2 == 0, r%2 != 0} {
						setTrigger(on)
						us := timeUpdates(b, env.Pool, st.sql, st.args, perRound)
						if on {
							with = append(with, us)
						} else {
							without = append(without, us)
						}
					}
				}
			}
			mw, mo := median(with), median(without)
			b.ReportMetric(mw, "µs/update-with")
			b.ReportMetric(mo, "µs/update-without")
			b.ReportMetric(mw/mo, "ratio")
		})
	}
}

// timeUpdates runs sql n times, each its own transaction committed without waiting for the WAL
// flush, and returns the mean µs per run.
func timeUpdates(b *testing.B, pool *pgxpool.Pool, sql string, args []any, n int) float64 {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET synchronous_commit = off`)
	require.NoError(b, err)
	defer func() { _, _ = conn.Exec(ctx, `RESET synchronous_commit`) }()
	start := time.Now()
	for range n {
		tag, err := conn.Exec(ctx, sql, args...)
		require.NoError(b, err)
		require.Positive(b, tag.RowsAffected())
	}
	return float64(time.Since(start).Microseconds()) / float64(n)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
