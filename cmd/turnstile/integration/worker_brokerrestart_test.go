package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// brokerRecoveryBound is how long after the broker's process is back every accepted turn must have
// ended: the workers see the topic's new incarnation, rejoin the new broker's group and consume the
// re-driven records and the new ones. The turns are short; the bound is the recovery's.
const brokerRecoveryBound = 60 * time.Second

// TestBrokerRestartWorkersRecover reproduces issue 43's first fault through real processes: the
// README's split (a front process with broker,intake,gateway; two worker processes) under load,
// the front SIGKILLed while the workers run turns and hold a backlog, and started again on the same
// addresses. The embedded broker comes back empty — a new topic incarnation, no group, no offsets
// — and intake re-drives the lost records from Postgres. Without a worker restart, every accepted
// turn ends succeeded within brokerRecoveryBound, in per-session order, and the workers log the
// fetch error they meet meanwhile with a rate limit, not once per fetch. The test prints the
// recovery times.
func TestBrokerRestartWorkersRecover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{
		Partitions:  4,
		MaxInflight: 4,
		FrontEnv:    []string{"TURNSTILE_REDRIVE_INTERVAL=500ms"},
	})
	workers := []string{"w1", "w2"}
	for _, n := range workers {
		c.startWorker(n)
	}
	waitReady(t, c.base)

	var (
		mu       sync.Mutex
		accepted []string
		bySess   = map[string][]string{}
		postedAt = map[string]time.Time{}
	)
	var posting atomic.Bool
	posting.Store(true)
	stop := make(chan struct{})
	loaderDone := make(chan struct{})
	go func() {
		defer close(loaderDone)
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if !posting.Load() {
				continue
			}
			session := fmt.Sprintf("brk-%d", i%16)
			if id := tryPost(c.base, session, 200+rand.IntN(600)); id != "" {
				mu.Lock()
				accepted = append(accepted, id)
				bySess[session] = append(bySess[session], id)
				postedAt[id] = time.Now()
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loaderDone
	})
	snapshot := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), accepted...)
	}

	// Load: more turns arrive than the eight slots run, so a backlog builds.
	testenv.WaitFor(t, 30*time.Second, "turns to succeed and a backlog to build", func() bool {
		ids := snapshot()
		return len(ids) >= 60 && terminalCount(t, c.env, ids) >= 10
	})
	// Intake writes a turn's queued row asynchronously, a flush interval after the broker
	// acknowledged its record, and the embedded broker keeps records in memory only: a turn
	// accepted in the last interval before a SIGKILL would have neither. That window is not this
	// test's subject, so posting pauses until every accepted turn has its row.
	posting.Store(false)
	before := snapshot()
	testenv.WaitFor(t, 30*time.Second, "every accepted turn's row", func() bool {
		for _, id := range before {
			if readTurn(t, c.env, id).Status == "" {
				return false
			}
		}
		return true
	})
	unfinished := len(before) - terminalCount(t, c.env, before)
	require.Positive(t, unfinished, "the broker must go while turns run and wait")

	require.NoError(t, c.front.Signal(syscall.SIGKILL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.front.Wait(ctx)
	posting.Store(true) // refused while the front is down; accepted again once it is back
	killedAt := time.Now()

	c.front = testenv.StartProcess(t, "front-2", c.frontEnv, strings.TrimPrefix(c.base, "http://"))
	allowShortSessions(t, c.brokerAddr)
	back := time.Now()
	t.Logf("front SIGKILLed with %d of %d accepted turns unfinished; back after %v", unfinished, len(before), back.Sub(killedAt).Round(time.Millisecond))

	// Load goes on after the restart, then stops; every accepted turn must end.
	testenv.WaitFor(t, 30*time.Second, "turns accepted after the restart", func() bool {
		return len(snapshot()) >= len(before)+40
	})
	close(stop)
	<-loaderDone
	all := snapshot()
	after := all[len(before):]

	var firstAfter time.Duration
	deadline := back.Add(brokerRecoveryBound)
	for {
		done := terminalCount(t, c.env, all)
		if firstAfter == 0 && terminalCount(t, c.env, after) > 0 {
			firstAfter = time.Since(back)
		}
		if done == len(all) {
			break
		}
		if time.Now().After(deadline) {
			queued := 0
			for _, id := range all {
				if readTurn(t, c.env, id).Status == "queued" {
					queued++
				}
			}
			t.Fatalf("%d of %d accepted turns not ended %v after the broker came back (%d queued; %d of %d posted after the restart ended); worker log: %s",
				len(all)-done, len(all), brokerRecoveryBound, queued, terminalCount(t, c.env, after), len(after), fetchErrorSummary(c.worker("w1").Logs()))
		}
		<-time.After(50 * time.Millisecond) // rows in Postgres: no signal to wait on
	}
	allDone := time.Since(back)
	t.Logf("recovery: first turn posted after the restart ended %v after the broker was back; all %d turns (%d posted after the restart) ended after %v (bound %v)",
		firstAfter.Round(time.Millisecond), len(all), len(after), allDone.Round(time.Millisecond), brokerRecoveryBound)

	// Every turn succeeded, each session's in the order intake accepted them.
	mu.Lock()
	sessions := bySess
	mu.Unlock()
	for s, ids := range sessions {
		for i, o := range orderedTurns(t, c.env, ids) {
			require.Equal(t, "succeeded", o.Status, "%s turn %d", s, i)
		}
		requireRanInOrder(t, orderedTurns(t, c.env, ids))
	}
	// No worker was restarted: each process started at the beginning is still running, and each
	// logged its repeated fetch error a bounded number of times.
	for _, n := range workers {
		p := c.worker(n)
		require.NoError(t, p.Signal(0), "worker %s is still running", n)
		lines := countLines(p.Logs(), "fetch error")
		t.Logf("worker %s: %d fetch-error lines (%s)", n, lines, fetchErrorSummary(p.Logs()))
		require.LessOrEqual(t, lines, 40, "worker %s logs a repeated fetch error with a rate limit", n)
	}
}

// tryPost posts a demo turn and returns its ID, or "" when it was not accepted (the front is down).
func tryPost(base, session string, ms int) string {
	b, _ := json.Marshal(map[string]any{"input": map[string]string{"text": "hi"}, "metadata": demoMeta(ms)})
	resp, err := http.Post(base+"/v1/sessions/"+session+"/turns", "application/json", bytes.NewReader(b)) //nolint:noctx // a test's client
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return ""
	}
	var a accepted
	if json.NewDecoder(resp.Body).Decode(&a) != nil {
		return ""
	}
	return a.TurnID
}

func countLines(logs, sub string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// fetchErrorSummary is the count of a worker's fetch-error lines and the first of them.
func fetchErrorSummary(logs string) string {
	n, first := 0, ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "fetch error") {
			if n == 0 {
				first = l
			}
			n++
		}
	}
	return fmt.Sprintf("%d fetch-error lines, first: %s", n, first)
}
