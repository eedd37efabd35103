package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestGatewayDrainOnSIGTERM: two gateway processes; clients follow sessions on the first while
// events are published; the first gets SIGTERM, drops readiness, closes its streams in jittered
// batches and exits cleanly; every client resumes on the second with Last-Event-ID and ends with
// every event exactly once.
func TestGatewayDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	start := func(name string) *testenv.Process {
		addr := testenv.FreeAddr(t)
		environ := append(env.Environ("gateway", addr, env.ID+"-"+name),
			"TURNSTILE_GATEWAY_DRAIN_BATCH=4", "TURNSTILE_GATEWAY_DRAIN_INTERVAL=150ms", "TURNSTILE_GATEWAY_RETRY=50ms")
		return testenv.StartProcess(t, name, environ, addr)
	}
	a, b := start("gw-a"), start("gw-b")
	const sessions, perSession, total = 4, 8, 200

	type result struct {
		got       []int
		movedOver bool
	}
	results := make(chan result, sessions*perSession)
	var opened sync.WaitGroup
	for s := range sessions {
		session := fmt.Sprintf("drain-%d", s)
		for range perSession {
			opened.Add(1)
			go func() {
				// A failed read below ends this goroutine (FailNow): the deferred sends still happen,
				// so the test reports that failure instead of waiting for this client forever.
				var r result
				open := false
				defer func() {
					if !open {
						opened.Done()
					}
					results <- r
				}()
				url := "/v1/sessions/" + session + "/events"
				first := testenv.OpenSSE(t, "http://"+a.Addr+url, "")
				open = true
				opened.Done()
				evs := first.Ended(t, time.Minute)
				r.got = payloadIndexes(t, evs)
				last := ""
				if len(evs) > 0 {
					last = evs[len(evs)-1].ID
				}
				// The rest from the other gateway, resumed from the last event received, and again
				// whenever that one ends the stream too (a slow client on a loaded machine), as a
				// browser would.
				deadline := time.Now().Add(time.Minute)
				for len(r.got) == 0 || r.got[len(r.got)-1] != total-1 {
					require.True(t, time.Now().Before(deadline), "the rest of the session within a minute; got %d events", len(r.got))
					more, _ := testenv.OpenSSE(t, "http://"+b.Addr+url, last).UntilEnd(t, time.Minute, func(e testenv.Event) bool { return e.Type == "turn.completed" })
					if len(more) > 0 {
						last = more[len(more)-1].ID
					}
					r.got = append(r.got, payloadIndexes(t, more)...)
					r.movedOver = true
				}
			}()
		}
	}
	opened.Wait()

	pub := streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 10000, time.Hour)
	published := make(chan struct{})
	half := make(chan struct{})
	// The terminal event waits until the draining gateway has exited, so every client of it was
	// closed (and must move) before its stream could end there.
	drained := make(chan struct{})
	// Closed on every path, so neither side waits for the other forever when one of them fails.
	closeHalf, closeDrained := sync.OnceFunc(func() { close(half) }), sync.OnceFunc(func() { close(drained) })
	defer closeDrained()
	go func() {
		defer close(published)
		defer closeHalf()
		for i := range total {
			if i == total/4 {
				closeHalf()
			}
			if i == total-1 {
				<-drained
			}
			for s := range sessions {
				typ := wire.EventType("turn.delta")
				if i == total-1 {
					typ = "turn.completed"
				}
				data, _ := json.Marshal(map[string]any{"turn_id": "t", "attempt": 1, "index": i})
				_, err := pub.Publish(context.Background(), storeKey(fmt.Sprintf("drain-%d", s)), "t", 1, wire.Event{Type: typ, Data: data}, "")
				if err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
			<-time.After(5 * time.Millisecond) // pacing the producer, not synchronising the test
		}
	}()
	<-half
	require.NoError(t, a.Signal(syscall.SIGTERM))
	testenv.WaitFor(t, 30*time.Second, "readiness to drop while draining", func() bool {
		resp, err := http.Get("http://" + a.Addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, a.Wait(ctx), "the draining gateway exits cleanly")
	closeDrained()
	<-published

	moved := 0
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	for range sessions * perSession {
		r := <-results
		require.Equal(t, want, r.got, "zero loss and no duplicate across the drain")
		if r.movedOver {
			moved++
		}
	}
	require.Equal(t, sessions*perSession, moved, "every client was moved to the other replica")
}

func payloadIndexes(t *testing.T, evs []testenv.Event) []int {
	t.Helper()
	out := make([]int, 0, len(evs))
	for _, e := range evs {
		var p struct {
			Index int `json:"index"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.Data), &p))
		out = append(out, p.Index)
	}
	return out
}
