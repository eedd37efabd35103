package admin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// agentOnly is the Submitter the search needs: it names the default agent and submits nothing.
type agentOnly struct{}

func (agentOnly) Submit(context.Context, wire.Envelope) error { return nil }
func (agentOnly) FlushQueued(context.Context)                 {}
func (agentOnly) Agent(string) (string, bool)                 { return "agent", true }

// loadTurnsSQL fills the schema's turns with n rows in one statement: 50 tenants of uneven size
// (a session's tenant is the square root of a hash of it, so t49 is the largest), 8 agents, 20,000
// sessions, statuses mostly succeeded with some failed (an error text and a dead
// letter each), queued and running, accepted over the last 30 days, metadata with a customer and
// a plan; each turn has one attempt row.
const loadTurnsSQL = `
INSERT INTO turns (turn_id, session_id, tenant, status, attempt, fencing_token, input, metadata, output, error,
    dead_lettered, accepted_at, started_at, finished_at, agent)
SELECT md5(i::text)::uuid, 't' || floor(sqrt((i % 20000) * 7919 % 9973 % 2500)) || '/s' || (i % 20000),
    't' || floor(sqrt((i % 20000) * 7919 % 9973 % 2500)),
    CASE WHEN i % 100 < 90 THEN 'succeeded' WHEN i % 100 < 96 THEN 'failed' WHEN i % 100 < 98 THEN 'queued' ELSE 'running' END,
    1, i, jsonb_build_object('text', 'question ' || i),
    jsonb_build_object('customer', 'c' || (i % 5000), 'plan', CASE WHEN i % 3 = 0 THEN 'pro' ELSE 'free' END),
    jsonb_build_object('text', 'answer ' || i),
    CASE WHEN i % 100 BETWEEN 90 AND 95 THEN 'upstream ' || (500 + i % 4) || ': model overloaded ' || (i % 97) END,
    CASE WHEN i % 100 BETWEEN 90 AND 95 THEN 'failed' END,
    now() - (i * interval '2.592 seconds'), now() - (i * interval '2.592 seconds'),
    CASE WHEN i % 100 < 96 THEN now() - (i * interval '2.592 seconds') + interval '2 seconds' END,
    'agent-' || (i % 8)
FROM generate_series(1, $1::int) AS i`

const loadAttemptsSQL = `
INSERT INTO turn_attempts (turn_id, fencing_token, attempt, worker, started_at, lease_expires_at, ended_at, outcome, events, waits)
SELECT turn_id, fencing_token, 1, 'worker-' || (fencing_token % 4), started_at, started_at + interval '30 seconds',
    finished_at, status, 12, 0
FROM turns`

// BenchmarkAdminQueries loads 1,000,000 turns into the benchmark's own schema and measures the
// admin API's searches (a page of 50 with the filter's counts, as GET /v1/admin/turns answers) and
// a turn's timeline rows, each interleaved with a primary-key read of turns in the same run: p50
// and p99 of each, and the ratio to the key read's. -v prints each search's plan (EXPLAIN
// ANALYZE, BUFFERS). The schema is dropped at the end.
func BenchmarkAdminQueries(b *testing.B) {
	const turns = 1_000_000
	env := testenv.New(b, testenv.Options{Partitions: 1})
	ctx := context.Background()
	start := time.Now()
	_, err := env.Pool.Exec(ctx, `SET maintenance_work_mem = '256MB'`)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, loadTurnsSQL, turns); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, loadAttemptsSQL); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `ANALYZE turns; ANALYZE turn_attempts`); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d turns in %s", turns, time.Since(start).Round(time.Millisecond))
	h := New(Config{}, Deps{Pool: env.Pool, Submit: agentOnly{}})
	// The session of the turn md5('1001') names, and its tenant.
	var sessionTenant string
	if err := env.Pool.QueryRow(ctx, `SELECT tenant FROM turns WHERE turn_id = md5('1001')::uuid`).Scan(&sessionTenant); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	dayAgo, twoDaysAgo := now.Add(-24*time.Hour), now.Add(-48*time.Hour)
	sample := uuid.MustParse("c4ca4238a0b923820dcc509a6f75849b") // md5("1"): the newest turn
	cases := []struct {
		name  string
		f     Filter
		scope string
	}{
		{"status+tenant", Filter{Status: []string{"failed"}}, "t49"},
		{"agent+time range", Filter{Agent: "agent-3", AcceptedAfter: &twoDaysAgo, AcceptedBefore: &dayAgo}, ""},
		{"session", Filter{Tenant: sessionTenant, SessionID: "s1001"}, ""},
		{"error text", Filter{Error: "overloaded 42", Status: []string{"failed"}}, ""},
		{"metadata", Filter{Metadata: map[string]any{"customer": "c1234"}}, ""},
	}
	pk := func() time.Duration {
		t0 := time.Now()
		if _, err := h.findTurn(ctx, sample, ""); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	report := func(name string, run func() time.Duration) {
		const rounds = 60
		var got, base []time.Duration
		for range rounds {
			base = append(base, pk())
			got = append(got, run())
		}
		p := func(d []time.Duration, q float64) time.Duration {
			slices.Sort(d)
			return d[int(q*float64(len(d)-1))]
		}
		g50, g99, k50, k99 := p(got, 0.5), p(got, 0.99), p(base, 0.5), p(base, 0.99)
		b.Logf("%-18s p50 %8s p99 %8s | pk read p50 %8s p99 %8s | ratio p50 %.1f p99 %.1f", name,
			g50.Round(time.Microsecond), g99.Round(time.Microsecond), k50.Round(time.Microsecond), k99.Round(time.Microsecond),
			float64(g50)/float64(k50), float64(g99)/float64(k99))
		b.ReportMetric(float64(g99.Microseconds()), strings.ReplaceAll(name, " ", "_")+"_p99_µs")
	}
	for b.Loop() {
		for _, c := range cases {
			report(c.name, func() time.Duration {
				t0 := time.Now()
				if _, err := h.Search(ctx, c.f, c.scope, nil, PageSizeDefault); err != nil {
					b.Fatal(err)
				}
				if _, err := h.counts(ctx, c.f, c.scope); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			})
		}
		report("timeline rows", func() time.Duration {
			t0 := time.Now()
			v, err := h.findTurn(ctx, sample, "")
			if err == nil {
				_, err = h.attempts(ctx, v, Lease{})
			}
			if err != nil {
				b.Fatal(err)
			}
			return time.Since(t0)
		})
	}
	if testing.Verbose() {
		for _, c := range cases {
			var args []any
			where := c.f.where(c.scope, "agent", &args)
			for _, q := range []string{
				`SELECT t.turn_id FROM turns t WHERE ` + where + ` ORDER BY t.accepted_at DESC, t.turn_id DESC LIMIT 50`,
				`SELECT t.status, count(*) FROM turns t WHERE ` + where + ` GROUP BY t.status`,
			} {
				rows, err := env.Pool.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) `+q, args...)
				if err != nil {
					b.Fatal(err)
				}
				var plan []string
				for rows.Next() {
					var line string
					if err := rows.Scan(&line); err != nil {
						b.Fatal(err)
					}
					plan = append(plan, line)
				}
				b.Logf("plan of %s:\n%s", c.name, strings.Join(plan, "\n"))
			}
		}
	}
}
