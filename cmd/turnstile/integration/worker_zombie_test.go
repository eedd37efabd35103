package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerZombie SIGSTOPs the worker running a turn until its lease has expired and another worker
// has taken the turn over and completed it, then SIGCONTs it: the stopped worker's writes are all
// rejected, so the stream holds nothing of the stale attempt after turn.retrying and the history
// holds one copy.
func TestWorkerZombie(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1, LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond})
	w1 := c.startWorker("w1")
	const session = "zombie"
	id := c.post(session, "keep talking", map[string]any{"demo": map[string]any{"duration_ms": 3000, "tokens": 30}})

	waitFirstDeltas(t, c.env, session)
	require.NoError(t, w1.Signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	t.Cleanup(func() { _ = w1.Signal(syscall.SIGCONT) })

	c.startWorker("w2")
	testenv.WaitFor(t, 60*time.Second, "the takeover to complete the turn", func() bool {
		return c.turn(id).Status == "succeeded"
	})
	r := c.turn(id)
	require.Equal(t, 2, r.Attempt, "the second attempt wins")
	require.Greater(t, time.Since(stoppedAt), 1500*time.Millisecond, "the takeover came after the lease expired")
	waitTerminalEvents(t, c.env, session, id)
	before := readStream(t, c.env, session)

	// Wake the zombie: it carries on with its attempt until its writes are refused.
	require.NoError(t, w1.Signal(syscall.SIGCONT))
	testenv.WaitFor(t, 30*time.Second, "the zombie to notice it lost its lease", func() bool {
		logs := w1.Logs()
		return strings.Contains(logs, "attempt lost its lease") || strings.Contains(logs, "completion fenced")
	})

	evs := readStream(t, c.env, session)
	require.Equal(t, before, evs, "the zombie must not add anything to the stream")
	requireFencedStream(t, evs, id, "turn.completed", 2)
	sawRetrying := false
	for _, e := range evs {
		if e.Type == "turn.retrying" {
			require.Equal(t, 2, e.Attempt)
			sawRetrying = true
		}
	}
	require.True(t, sawRetrying, "the takeover announces itself with turn.retrying")
	h := history(t, c.env, session)
	require.Equal(t, []historyMsg{{1, id, "user"}, {2, id, "assistant"}}, h)
	r = c.turn(id)
	require.Equal(t, "succeeded", r.Status)
	require.Equal(t, 2, r.Attempt)
}
