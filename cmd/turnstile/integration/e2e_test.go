package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// checkSessions posts turns for several sessions, reads each session's stream from its start,
// asserts the exact events in order, then resumes from the middle and asserts exactly the rest.
func checkSessions(t *testing.T, base string, sessions, turnsPerSession int) {
	t.Helper()
	var wg sync.WaitGroup
	for s := range sessions {
		session := fmt.Sprintf("e2e-%d", s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var want []string
			var turnIDs []string
			for i := range turnsPerSession {
				text := fmt.Sprintf("message %d of %s", i, session)
				a := postTurn(t, base, session, text)
				require.Equal(t, "queued", a.Status)
				want = append(want, expectedEvents(a.TurnID, text)...)
				turnIDs = append(turnIDs, a.TurnID)
			}
			// Opened after posting: without a cursor the stream starts at the oldest retained event.
			stream := testenv.OpenSSE(t, base+"/v1/sessions/"+session+"/events", "")
			require.Equal(t, http.StatusOK, stream.Resp.StatusCode)
			require.Equal(t, "text/event-stream", stream.Resp.Header.Get("Content-Type"))
			got := stream.Until(t, 30*time.Second, countCompleted(turnsPerSession))
			require.Equal(t, want, describe(t, got))
			stream.Close()

			mid := len(got) / 2
			resumed := testenv.OpenSSE(t, base+"/v1/sessions/"+session+"/events", got[mid].ID)
			rest := resumed.Until(t, 10*time.Second, func(e testenv.Event) bool { return e.ID == got[len(got)-1].ID })
			require.Equal(t, describe(t, got[mid+1:]), describe(t, rest), "resume must send exactly the events after the cursor")
			for i := range rest {
				require.Equal(t, got[mid+1+i].ID, rest[i].ID)
			}
			resumed.Close()

			for _, id := range turnIDs {
				var turn struct {
					Status  string `json:"status"`
					Attempt int    `json:"attempts"`
				}
				require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+id, &turn))
				require.Equal(t, "succeeded", turn.Status)
				require.Equal(t, 1, turn.Attempt)
			}
		}()
	}
	wg.Wait()
}

// TestEndToEnd composes intake, worker and gateway in one process against real Postgres, real Redis
// and kfake.
func TestEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 4})
	stack := startStack(t, env, "intake,worker,gateway")
	checkSessions(t, "http://"+stack.Addr(), 6, 3)
}

// TestSplitProcesses runs the broker, intake and gateway in one OS process and the worker in
// another, as `make dev` users split a stack, and checks the same flow and a clean SIGTERM exit.
func TestSplitProcesses(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 4})
	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	frontAddr := testenv.FreeAddr(t)
	frontEnv := append(env.Environ("broker,intake,gateway", frontAddr, "front"), "TURNSTILE_BROKER_ADDR="+brokerAddr)
	front := testenv.StartProcess(t, "front", frontEnv, frontAddr)
	workerAddr := testenv.FreeAddr(t)
	worker := testenv.StartProcess(t, "worker", env.Environ("worker", workerAddr, "worker-1"), workerAddr)

	checkSessions(t, "http://"+front.Addr, 3, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, worker.Signal(syscall.SIGTERM))
	require.NoError(t, worker.Wait(ctx), "worker must exit cleanly on SIGTERM:\n%s", worker.Logs())
	require.NoError(t, front.Signal(syscall.SIGTERM))
	require.NoError(t, front.Wait(ctx), "front must exit cleanly on SIGTERM:\n%s", front.Logs())
}
