package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/sse"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

const waitTimeout = 10 * time.Second

// Keys of the two tenants the test map lists (shape "ts_<key id>_<secret>").
const (
	acmeKey   = "ts_euw1-3f9a0c1d2e4b_secret"
	globexKey = "ts_use1-8a7b6c5d4e3f_secret"
)

// seen is what a fake region received.
type seen struct {
	method, path, body string
	header             http.Header
}

// fakeRegion is an HTTP server standing in for one region: it records every request and answers
// with its code; /stream sends one event, then a second once the test releases it.
type fakeRegion struct {
	code    string
	srv     *httptest.Server
	got     chan seen
	release chan struct{}
}

func newFakeRegion(t *testing.T, code string) *fakeRegion {
	t.Helper()
	f := &fakeRegion{code: code, got: make(chan seen, 100), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.got <- seen{r.Method, r.URL.Path, string(body), r.Header.Clone()}
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\nevent: one\ndata: {}\n\n")
			_ = http.NewResponseController(w).Flush()
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "id: 2\nevent: two\ndata: {}\n\n")
			return
		}
		w.Header().Set("X-Region", code)
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, code)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegion) next(t *testing.T) seen {
	t.Helper()
	select {
	case s := <-f.got:
		return s
	case <-time.After(waitTimeout):
		t.Fatalf("region %s received nothing", f.code)
		return seen{}
	}
}

// fakeHealth is a Health whose answers the test sets; it records failed forwards.
type fakeHealth struct {
	mu     sync.Mutex
	down   map[string]bool
	failed []string
}

func (h *fakeHealth) Up(code string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down[code]
}

func (h *fakeHealth) Failed(code string, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = append(h.failed, code)
	h.down[code] = true
}

func (h *fakeHealth) setDown(code string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down[code] = down
}

type bundle struct {
	fw         *Handler
	router     *httptest.Server
	euw1, use1 *fakeRegion
	health     *fakeHealth
}

// setup runs a router over two fake regions, euw1 (the default home, tenant acme, policy wait)
// and use1 (tenant globex, policy failover), and a third, dead, which is a closed port. In the
// map's order euw1 follows use1 (wrapping).
func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{euw1: newFakeRegion(t, "euw1"), use1: newFakeRegion(t, "use1"), health: &fakeHealth{down: map[string]bool{}}}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	m, err := region.Parse(fmt.Appendf(nil, `{"regions": [{"code": "euw1", "url": %q}, {"code": "dead", "url": %q}, {"code": "use1", "url": %q}],
	  "default_home": "euw1",
	  "tenants": [{"name": "acme", "home": "euw1", "policy": "wait", "key_ids": ["euw1-3f9a0c1d2e4b"]},
	              {"name": "globex", "home": "use1", "policy": "failover", "key_ids": ["use1-8a7b6c5d4e3f"]}]}`,
		b.euw1.srv.URL, dead.URL, b.use1.srv.URL))
	require.NoError(t, err)
	b.fw, err = New(Config{ConnectTimeout: time.Second, RetryAfter: 2 * time.Second}, m, b.health, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	b.router = httptest.NewServer(b.fw)
	t.Cleanup(func() {
		b.router.Close()
		b.fw.Close()
	})
	return b
}

// reply is a response whose body was read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func (b *bundle) do(t *testing.T, method, path, key, body string) (reply, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, b.router.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header}, string(out)
}

func (b *bundle) count(code, outcome string) float64 {
	return testutil.ToFloat64(b.fw.forwards.WithLabelValues(code, outcome))
}

// requireUnavailable checks a 503 region-unavailable problem naming code.
func requireUnavailable(t *testing.T, resp reply, body, code string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, httpx.ProblemRegionUnavailable.URI(), p["type"])
	require.Equal(t, code, p[region.MemberRegion])
}

func TestForward(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var c Config
		c.applyDefaults()
		require.Positive(t, c.ConnectTimeout)
		require.Positive(t, c.RetryAfter)
		require.Positive(t, c.IdleConns)
		require.Positive(t, c.MaxBody)
	})

	t.Run("OwnerFromPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, path := range []string{
			"/v1/turns/use1-0192f3c4-0000-7000-8000-000000000000", "/v1/sessions/use1-s/turns", "/v1/sessions/use1-s/events",
			"/v1/chat/use1-c/stream", "/threads/use1-th/runs/use1-r/join",
		} {
			resp, body := b.do(t, http.MethodGet, path, acmeKey, "")
			require.Equal(t, http.StatusTeapot, resp.StatusCode, "the region's answer passes through")
			require.Equal(t, "use1", body, path)
			require.Equal(t, path, b.use1.next(t).path)
		}
		require.Equal(t, 5.0, b.count("use1", OutcomeForwarded))
	})

	t.Run("ClientChosenIDGoesHome", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, body := b.do(t, http.MethodPost, "/v1/sessions/user-1/turns", globexKey, `{"input":{"text":"hi"}}`)
		require.Equal(t, "use1", body, "globex's home")
		require.Equal(t, `{"input":{"text":"hi"}}`, b.use1.next(t).body)
		_, body = b.do(t, http.MethodPost, "/v1/sessions/user-1/turns", acmeKey, `{}`)
		require.Equal(t, "euw1", body, "acme's home")
		_, body = b.do(t, http.MethodGet, "/v1/sessions/user-1/events", "", "")
		require.Equal(t, "euw1", body, "without a key: default_home")
		_, body = b.do(t, http.MethodGet, "/v1/turns/apse2-0192f3c4-0000-7000-8000-000000000000", globexKey, "")
		require.Equal(t, "use1", body, "a prefix that is no region of the map is a client's choice")
	})

	t.Run("StreamTokenNamesTenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tok := streamtoken.New(streamtoken.Options{}).SignKey("use1-8a7b6c5d4e3f", "globex", "user-1")
		_, body := b.do(t, http.MethodGet, "/v1/sessions/user-1/events", tok, "")
		require.Equal(t, "use1", body, "a stream token names its key, so its tenant's home")
		_, body = b.do(t, http.MethodGet, "/v1/sessions/user-1/events?turn_id=x&access_token="+url.QueryEscape(tok), "", "")
		require.Equal(t, "use1", body, "as EventSource sends it")
	})

	t.Run("HeadersPass", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.router.URL+"/v1/sessions/euw1-s/events?turn_id=x", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		req.Header.Set("Last-Event-ID", "k3f9:1-0")
		req.Header.Set("X-Deadline-Epoch-Ms", "123")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		got := b.euw1.next(t)
		require.Equal(t, "Bearer "+acmeKey, got.header.Get("Authorization"))
		require.Equal(t, "k3f9:1-0", got.header.Get("Last-Event-ID"))
		require.Equal(t, "123", got.header.Get("X-Deadline-Epoch-Ms"))
		require.Equal(t, strings.TrimPrefix(b.router.URL, "http://"), got.header.Get("X-Forwarded-Host"), "the region sees the router's address")
		require.Equal(t, "euw1", resp.Header.Get("X-Region"), "answer headers pass back")
	})

	t.Run("A2ABodyByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Odd spacing and member order: the region must receive exactly these bytes.
		body := `{ "id":7,"jsonrpc":"2.0", "method":"message/send","params":{"message":{"contextId":"use1-c","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}} }`
		_, answer := b.do(t, http.MethodPost, "/a2a", acmeKey, body)
		require.Equal(t, "use1", answer, "the context's owner, not the tenant's home")
		require.Equal(t, body, b.use1.next(t).body)
		big := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"use1-t"},"pad":"` + strings.Repeat("x", 300<<10) + `"}`
		_, answer = b.do(t, http.MethodPost, "/a2a", acmeKey, big)
		require.Equal(t, "euw1", answer, "a body past MaxBody is not routed by, but still sent whole")
		require.Equal(t, big, b.euw1.next(t).body)
	})

	t.Run("StreamUnbuffered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.router.URL+"/stream", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body, 0)
		ev, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, "one", ev.Type, "the first event arrives while the region still holds the stream open")
		close(b.euw1.release)
		ev, err = r.Next()
		require.NoError(t, err)
		require.Equal(t, "two", ev.Type)
	})

	t.Run("OwnerDownAnsweredAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.health.setDown("use1", true)
		for _, key := range []string{acmeKey, globexKey} {
			start := time.Now()
			resp, body := b.do(t, http.MethodGet, "/v1/sessions/use1-s/events", key, "")
			requireUnavailable(t, resp, body, "use1")
			require.Less(t, time.Since(start), time.Second, "answered from health state, no dial")
		}
		resp, body := b.do(t, http.MethodPost, "/v1/sessions/user-1/turns", globexKey, `{}`)
		requireUnavailable(t, resp, body, "use1")
		require.Equal(t, 3.0, b.count("use1", OutcomeUnavailable), "work with an ID never fails over, failover tenant or not")
		require.Empty(t, b.use1.got)
	})

	t.Run("FailoverNewWorkOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.health.setDown("use1", true)
		for _, path := range []string{"/v1/sessions", "/threads", "/runs/stream"} {
			_, body := b.do(t, http.MethodPost, path, globexKey, `{}`)
			require.Equal(t, "euw1", body, "globex's new work goes to the next healthy region")
		}
		_, body := b.do(t, http.MethodPost, "/a2a", globexKey, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m"}}}`)
		require.Equal(t, "euw1", body)
		require.Equal(t, 4.0, b.count("euw1", OutcomeFailover))

		b.health.setDown("euw1", true)
		resp, body := b.do(t, http.MethodPost, "/v1/sessions", acmeKey, `{}`)
		requireUnavailable(t, resp, body, "euw1")
		b.health.setDown("use1", false)
		resp, body = b.do(t, http.MethodPost, "/v1/sessions", acmeKey, `{}`)
		requireUnavailable(t, resp, body, "euw1")
		require.Equal(t, 2.0, b.count("euw1", OutcomeUnavailable), "acme waits for its home")
	})

	t.Run("A2AErrorIsJSONRPC", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.health.setDown("use1", true)
		resp, body := b.do(t, http.MethodPost, "/a2a", acmeKey, `{"jsonrpc":"2.0","id":"q1","method":"tasks/get","params":{"id":"use1-t"}}`)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.JSONEq(t, `{"jsonrpc":"2.0","id":"q1","error":{"code":-32050,"message":"region use1 is unavailable; retry later","data":{"region":"use1"}}}`, body)
	})

	t.Run("ConnectFailureMarksDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := time.Now()
		resp, body := b.do(t, http.MethodGet, "/v1/turns/dead-0192f3c4-0000-7000-8000-000000000000", acmeKey, "")
		requireUnavailable(t, resp, body, "dead")
		require.Less(t, time.Since(start), 2*time.Second, "bounded by the connect timeout")
		require.Equal(t, []string{"dead"}, b.health.failed)
		require.Equal(t, 1.0, b.count("dead", OutcomeError))
		resp, body = b.do(t, http.MethodGet, "/v1/turns/dead-0192f3c4-0000-7000-8000-000000000000", acmeKey, "")
		requireUnavailable(t, resp, body, "dead")
		require.Equal(t, 1.0, b.count("dead", OutcomeUnavailable), "the next request does not dial")
	})

	t.Run("CloseEndsStreams", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		stream := testenv.OpenSSE(t, b.router.URL+"/stream", "")
		ev, ok := stream.Next(t, waitTimeout)
		require.True(t, ok)
		require.Equal(t, "one", ev.Type)
		b.fw.Close()
		require.Empty(t, stream.Ended(t, waitTimeout), "the stream ends without its second event")
	})
}
