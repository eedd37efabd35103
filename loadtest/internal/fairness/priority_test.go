package fairness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestPriorityBehindBacklog posts a top-priority turn behind 5,000 queued turns of its tenant, on
// a whole stack with one worker of 4 slots busy with 2-second turns, and measures from the turn
// rows in Postgres how long after the next slot freed (the first finished_at after the turn was
// accepted) it started: at most 1 s. Not parallel: its 6,000 posts would take the machine from
// TestSmoke's runs, which compare each other's rates.
func TestPriorityBehindBacklog(t *testing.T) {
	const backlog, slots, posters = 5000, 4, 32
	env := testenv.New(t, testenv.Options{Partitions: 4})
	cfg := env.Config
	cfg.KafkaBrokers = "" // a broker of its own
	cfg.MaxInflight = slots
	cfg.Intake.TenantRate, cfg.Intake.TenantBurst = 100_000, 100_000
	cfg.Intake.MaxBacklogAge = time.Hour
	cfg.Intake.MaxQueuedTurns = 1_000_000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, cfg, "intake,worker", env.Log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Stop(context.Background(), true)) })

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = posters
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	post := func(session string, priority int) (string, error) {
		body, _ := json.Marshal(map[string]any{
			"input":    map[string]string{"text": "wait your turn"},
			"metadata": map[string]any{"demo": demo.Knobs{Tokens: 2, DurationMs: 2000}},
			"priority": priority,
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.URL+"/v1/sessions/"+session+"/turns", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusAccepted {
			return "", fmt.Errorf("%d: %s", resp.StatusCode, b)
		}
		var a struct {
			TurnID string `json:"turn_id"`
		}
		return a.TurnID, json.Unmarshal(b, &a)
	}

	// The backlog, at the default priority over 1,000 sessions; 1,000 more than 5,000, as the
	// worker starts some (2 a second) while they are posted.
	next := make(chan int)
	errs := make(chan error, posters)
	var wg sync.WaitGroup
	for range posters {
		wg.Go(func() {
			for i := range next {
				if _, err := post(fmt.Sprintf("backlog-%04d", i%1000), wire.PriorityDefault); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range backlog + 1000 {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)

	// Intake records a turn's row after answering; count the queued ones once every row is in.
	var recorded, queued int
	testenv.WaitFor(t, time.Minute, "every turn recorded", func() bool {
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'queued') FROM turns`).Scan(&recorded, &queued))
		return recorded >= backlog+1000
	})
	require.GreaterOrEqual(t, queued, backlog, "turns queued ahead")
	id, err := post("urgent", wire.PriorityMax)
	require.NoError(t, err)

	var started bool
	testenv.WaitFor(t, 2*time.Minute, "the priority turn starts", func() bool {
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE turn_id::text = $1 AND started_at IS NOT NULL)`, id).Scan(&started))
		return started
	})
	var gapSec float64
	var ahead int
	require.NoError(t, st.Pool.QueryRow(ctx, `
		SELECT extract(epoch FROM p.started_at - (SELECT min(finished_at) FROM turns WHERE finished_at >= p.accepted_at))::float8,
		       (SELECT count(*) FROM turns WHERE status = 'queued' AND turn_id <> p.turn_id)
		FROM turns p WHERE p.turn_id::text = $1`, id).Scan(&gapSec, &ahead))
	gap := time.Duration(gapSec * float64(time.Second))
	t.Logf("priority %d turn behind %d queued turns (%d still queued when it started): slot freed → started %v", wire.PriorityMax, queued, ahead, gap)
	require.GreaterOrEqual(t, ahead, backlog-2*slots*60, "the turn went ahead of the backlog, not after it")
	require.LessOrEqual(t, gap, time.Second)
}
