package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerRetention runs a worker with a one-second TURNSTILE_RETENTION: a finished turn's row is
// deleted once it is older than that, while a running turn's row stays and the history is kept.
func TestWorkerRetention(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	env.Config.Retention = time.Second
	env.Config.Worker.RetentionInterval = 100 * time.Millisecond
	env.Config.Worker.RetentionBatch = 2
	env.Config.DrainTimeout = 100 * time.Millisecond // the long turn is handed off at cleanup
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()

	var done []string
	for i := range 5 {
		done = append(done, postTurnWith(t, base, "retention", map[string]any{"input": map[string]string{"text": "hi"}, "metadata": demoMeta(10 + i)}))
	}
	testenv.WaitFor(t, 30*time.Second, "the turns to finish", func() bool { return terminalCount(t, env, done) == len(done) })
	long := postTurnWith(t, base, "retention-long", map[string]any{"input": map[string]string{"text": "hi"}, "metadata": demoMeta(30000)})
	testenv.WaitFor(t, 30*time.Second, "the long turn to run", func() bool { return readTurn(t, env, long).Status == "running" })

	testenv.WaitFor(t, 30*time.Second, "the finished rows to be deleted", func() bool {
		for _, id := range done {
			if readTurn(t, env, id).Status != "" {
				return false
			}
		}
		return true
	})
	require.Equal(t, http.StatusNotFound, getJSON(t, base+"/v1/turns/"+done[0], nil))
	require.Equal(t, "running", readTurn(t, env, long).Status, "live turns are never deleted")
	require.Len(t, history(t, env, "retention"), 2*len(done), "the session history is kept")
}
