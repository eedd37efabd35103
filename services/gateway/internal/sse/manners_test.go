package sse_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

func problemType(t *testing.T, resp *http.Response) string {
	t.Helper()
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	s, _ := p["type"].(string)
	return strings.TrimPrefix(s, "https://turnstile.dev/problems/")
}

func TestStreamTokens(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	oldKey := config.SigningKey{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	newKey := config.SigningKey{ID: "k2", Secret: []byte("fedcba9876543210fedcba9876543210")}
	// Rotation: k2 signs, k1 still verifies.
	verifier := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{newKey, oldKey}, TTL: time.Hour})
	gw := f.replica(sse.Config{Tokens: verifier})
	session, other := newSession(), newSession()
	f.publish(session, newTurn(), 0, 2, true, "")

	valid := verifier.Sign("tenant-a", session)
	rotated := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{oldKey}, TTL: time.Hour}).Sign("tenant-a", session)
	expired := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{newKey}, TTL: -time.Second}).Sign("tenant-a", session)
	foreign := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{{ID: "k2", Secret: []byte("not-the-same-secret-at-all-32byt")}}, TTL: time.Hour}).Sign("tenant-a", session)
	forOther := verifier.Sign("tenant-b", other)
	payload, sig, _ := strings.Cut(valid, ".")
	body, _ := base64.RawURLEncoding.DecodeString(payload)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(body), session, other, 1))) + "." + sig

	cases := []struct {
		name, bearer, query, session string
		status                       int
		problem                      string
	}{
		{"Missing", "", "", session, http.StatusUnauthorized, "unauthenticated"},
		{"Garbage", "abc", "", session, http.StatusUnauthorized, "unauthenticated"},
		{"WrongKey", foreign, "", session, http.StatusUnauthorized, "unauthenticated"},
		{"Tampered", "", tampered, other, http.StatusUnauthorized, "unauthenticated"},
		{"Expired", expired, "", session, http.StatusUnauthorized, "stream-token-expired"},
		{"OtherSessionLooksMissing", forOther, "", session, http.StatusNotFound, "session-not-found"},
		{"BearerOK", valid, "", session, http.StatusOK, ""},
		{"QueryOK", "", valid, session, http.StatusOK, ""},
		{"RotatedKeyOK", rotated, "", session, http.StatusOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := gw.url(c.session)
			if c.query != "" {
				url += "?access_token=" + c.query
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if c.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode)
			if c.problem != "" {
				require.Equal(t, c.problem, problemType(t, resp))
			} else {
				require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{CORSOrigins: []string{"https://app.example"}})
	session := newSession()
	f.publish(session, newTurn(), 0, 1, true, "")
	for _, c := range []struct {
		origin, allowed string
	}{{"https://app.example", "https://app.example"}, {"https://evil.example", ""}} {
		req, _ := http.NewRequest(http.MethodOptions, gw.url(session), nil)
		req.Header.Set("Origin", c.origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		require.Equal(t, c.allowed, resp.Header.Get("Access-Control-Allow-Origin"), c.origin)
		if c.allowed != "" {
			require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Last-Event-ID")
		}

		ctx, cancel := context.WithCancel(context.Background())
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, gw.url(session), nil)
		req.Header.Set("Origin", c.origin)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, c.allowed, resp.Header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, resp.Header.Values("Vary"), "Origin")
		cancel()
		resp.Body.Close()
	}
}

// readRefusal reads a stream the gateway refuses inside a 200: a retry hint and a comment, then EOF.
func readRefusal(t *testing.T, url string) string {
	t.Helper()
	// Bounded: an admitted stream (the refusal failed) would never end on its own.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "retryable refusals stay inside a 200 for EventSource")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^retry: \d+$`, string(b))
	return string(b)
}

func TestCaps(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{MaxPerSession: 2, MaxConnections: 3, OverloadRetry: 4 * time.Second})
	a, b, c := newSession(), newSession(), newSession()
	testenv.OpenSSE(t, gw.url(a), "")
	testenv.OpenSSE(t, gw.url(a), "")
	testenv.WaitFor(t, wait, "two streams", func() bool { return gw.handler.Connections() == 2 })
	body := readRefusal(t, gw.url(a))
	require.Contains(t, body, "over capacity")
	require.Regexp(t, `retry: (2\d{3}|[3-5]\d{3})\n`, body, "the overload hint is the jittered overload retry")

	testenv.OpenSSE(t, gw.url(b), "")
	testenv.WaitFor(t, wait, "three streams", func() bool { return gw.handler.Connections() == 3 })
	require.Contains(t, readRefusal(t, gw.url(c)), "over capacity", "the replica cap")
	require.Equal(t, 2.0, gw.counter(t, "turnstile_gateway_streams_closed_total", "over_capacity"))
}

// TestTenantShare reproduces the seen run: one tenant fills what it may of the replica's cap, and
// another tenant's first stream is still admitted; the first tenant's next one is refused inside a
// 200 with the overload retry hint.
func TestTenantShare(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	signer := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, TTL: time.Hour})
	gw := f.replica(sse.Config{Tokens: signer, MaxConnections: 4, MaxTenantShare: 50, OverloadRetry: 4 * time.Second})
	open := func(tenant string) string {
		session := newSession()
		return gw.url(session) + "?access_token=" + signer.Sign(tenant, session)
	}
	testenv.OpenSSE(t, open("greedy"), "")
	testenv.OpenSSE(t, open("greedy"), "")
	testenv.WaitFor(t, wait, "two streams", func() bool { return gw.handler.Connections() == 2 })
	body := readRefusal(t, open("greedy"))
	require.Contains(t, body, "share")
	require.Regexp(t, `retry: (2\d{3}|[3-5]\d{3})\n`, body, "the overload hint is the jittered overload retry")
	require.Equal(t, 1.0, gw.counter(t, "turnstile_gateway_streams_closed_total", "over_tenant_share"))

	other := testenv.OpenSSE(t, open("modest"), "")
	require.Equal(t, http.StatusOK, other.Resp.StatusCode)
	testenv.WaitFor(t, wait, "the other tenant's stream", func() bool { return gw.handler.Connections() == 3 })
}

// TestSlowClient: a client that stops reading cannot stall the others; it is cut loose and can
// resume from its cursor.
func TestSlowClient(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{WriteTimeout: 300 * time.Millisecond})
	session, turn := newSession(), newTurn()
	f.publish(session, turn, 0, 1, false, "")

	// The slow client sends its request and then never reads.
	u := strings.TrimPrefix(gw.srv.URL, "http://")
	slow, err := net.Dial("tcp", u)
	require.NoError(t, err)
	defer slow.Close()
	_, err = fmt.Fprintf(slow, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", session, u)
	require.NoError(t, err)
	fast := testenv.OpenSSE(t, gw.url(session), "")
	testenv.WaitFor(t, wait, "both subscribed", func() bool { return gw.hub.Subscribers() == 2 })

	const total = 1500
	pad := strings.Repeat("x", 4096)
	done := make(chan struct{})
	go func() { defer close(done); f.publish(session, turn, 1, total-1, true, pad) }()
	got := fast.Until(t, wait, isIndex(total-1))
	require.Equal(t, seq(0, total), indexes(t, got), "the fast client gets everything, unstalled")
	<-done
	testenv.WaitFor(t, wait, "slow client cut loose", func() bool { return gw.handler.Connections() == 1 })

	// What the slow client did receive ends cleanly at an event boundary or mid-write; its last
	// complete id is a cursor to resume from, and the resume is exact.
	_ = slow.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(slow)
	last := ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "id: ") {
			last = strings.TrimSpace(strings.TrimPrefix(line, "id: "))
		}
	}
	require.NotEmpty(t, last)
	resumed := testenv.OpenSSE(t, gw.url(session), last)
	rest := resumed.Until(t, wait, isIndex(total-1))
	idx := indexes(t, rest)
	require.Equal(t, seq(idx[0], total), idx)
	require.Equal(t, got[idx[0]-1].ID, last, "resume starts right after the slow client's last event")
}

// TestDrain: two replicas; the first drains while events are being written. Every client is
// closed with a retry hint, in batches, resumes on the second replica, and ends with every event
// exactly once.
func TestDrain(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	draining := f.replica(sse.Config{DrainBatch: 7, DrainInterval: 20 * time.Millisecond})
	other := f.replica(sse.Config{})
	const sessions, perSession, total = 5, 8, 300
	var ids []string
	for range sessions {
		ids = append(ids, newSession())
	}
	var opened sync.WaitGroup
	results := make(chan []int, sessions*perSession)
	for _, s := range ids {
		for range perSession {
			opened.Add(1)
			go func(session string) {
				// A failed read below ends this goroutine (FailNow): the deferred sends still happen,
				// so the test reports that failure instead of waiting for this stream forever.
				var got []int
				open := false
				defer func() {
					if !open {
						opened.Done()
					}
					results <- got
				}()
				first := testenv.OpenSSE(t, draining.url(session), "")
				open = true
				opened.Done()
				evs := first.Ended(t, 2*wait)
				last := ""
				if len(evs) > 0 {
					last = evs[len(evs)-1].ID
				}
				got = indexes(t, evs)
				// The rest from the other replica, resuming from the last event received (no cursor
				// yet: from the oldest event, as a fresh client does) and again whenever that replica
				// ends the stream too (a slow client under a loaded machine), as a browser would.
				deadline := time.Now().Add(2 * wait)
				for len(got) == 0 || got[len(got)-1] != total-1 {
					require.True(t, time.Now().Before(deadline), "the rest of the session within %v; got %d events", 2*wait, len(got))
					more, _ := testenv.OpenSSE(t, other.url(session), last).UntilEnd(t, 2*wait, isIndex(total-1))
					if len(more) > 0 {
						last = more[len(more)-1].ID
					}
					got = append(got, indexes(t, more)...)
				}
			}(s)
		}
	}
	opened.Wait()
	testenv.WaitFor(t, wait, "all streams open", func() bool { return draining.handler.Connections() == sessions*perSession })

	var pubs sync.WaitGroup
	for _, s := range ids {
		pubs.Add(1)
		go func(session string) {
			defer pubs.Done()
			turn := newTurn()
			f.publish(session, turn, 0, total/2, false, "")
			f.publish(session, turn, total/2, total-total/2, true, "")
		}(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	draining.handler.Drain(ctx)
	require.Contains(t, readRefusal(t, draining.url(ids[0])), "draining", "new streams are refused inside a 200 while draining")
	pubs.Wait()
	for range sessions * perSession {
		require.Equal(t, seq(0, total), within(t, results, 5*wait, "client's result"), "zero loss, no duplicate across the move")
	}
	// Every stream was ended by the draining replica with a reason: most by the drain itself, and
	// under a loaded machine a few before the drain reached them, as slow clients (the publishes
	// outran them) or for a failed read from Redis, each of which the client resumed from as well.
	closed := map[string]float64{}
	sum := 0.0
	for _, reason := range []string{"drain", "slow_client", "unavailable", "epoch_changed"} {
		closed[reason] = draining.counter(t, "turnstile_gateway_streams_closed_total", reason)
		sum += closed[reason]
	}
	require.Equal(t, float64(sessions*perSession), sum, "streams closed by reason: %v", closed)
	require.Positive(t, closed["drain"], "the drain closed streams: %v", closed)
	testenv.WaitFor(t, wait, "the draining replica to hold no stream", func() bool { return draining.handler.Connections() == 0 })
}

// TestKeepAliveAndRetry: every stream starts with its own jittered retry hint and carries keep-alive
// comments at the configured interval.
func TestKeepAliveAndRetry(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{KeepAlive: 50 * time.Millisecond, Retry: time.Second})
	session := newSession()
	retries := map[int]bool{}
	for range 12 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.url(session), nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		br := bufio.NewReader(resp.Body)
		keepAlives, retry := 0, -1
		for keepAlives < 2 {
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			if v, ok := strings.CutPrefix(line, "retry: "); ok {
				retry, err = strconv.Atoi(strings.TrimSpace(v))
				require.NoError(t, err)
			}
			if line == ": keep-alive\n" {
				keepAlives++
			}
		}
		cancel()
		resp.Body.Close()
		require.GreaterOrEqual(t, retry, 500, "retry is jittered over [base/2, 3*base/2)")
		require.Less(t, retry, 1500)
		retries[retry] = true
	}
	require.Greater(t, len(retries), 1, "connections do not all get the same retry")
}
