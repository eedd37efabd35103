package deliver

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/notifier/internal/outbox"
	"github.com/turnstile-run/turnstile/services/notifier/internal/safehttp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

func sender(t *testing.T, opt safehttp.Options) *Sender {
	t.Helper()
	if opt.Timeout == 0 {
		opt.Timeout = time.Second
	}
	s, err := New(Options{
		Client: safehttp.New(opt), Secret: config.NotifierSigningSecretDefault, PerDestination: 2,
		MaxAttempts: 3, MaxAge: time.Hour, BackoffBase: 10 * time.Millisecond, BackoffMax: time.Second,
	})
	require.NoError(t, err)
	return s
}

func note(url string) outbox.Notification {
	return outbox.Notification{ID: 7, TurnID: uuid.New(), URL: url, Status: "running", Payload: []byte(`{}`), Created: time.Now()}
}

// TestRefusedDestinations is the table of destinations the default settings refuse: none is
// connected to, and each notification is dead-lettered with the reason.
func TestRefusedDestinations(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	// A redirect: the redirecting server is allowed (it is on loopback), its target is never asked.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()

	def := sender(t, safehttp.Options{})
	for _, tc := range []struct{ name, url string }{
		{"Loopback", "https://127.0.0.1:" + port + "/hook"},
		{"LoopbackV6", "https://[::1]:" + port + "/hook"},
		{"Private", "https://10.0.0.1/hook"},
		{"Metadata", "https://169.254.169.254/latest/meta-data/"},
		{"NameResolvingToLoopback", "https://localhost:" + port + "/hook"},
		{"HTTPPublicName", "http://example.com/hook"},
		{"MappedLoopback", "https://[::ffff:127.0.0.1]:" + port + "/hook"},
		{"Unspecified", "https://0.0.0.0:" + port + "/hook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := def.Deliver(context.Background(), note(tc.url))
			require.Equal(t, Dead, res.Outcome, res.Err)
			require.Contains(t, res.Err, "refused")
		})
	}
	t.Run("Redirect", func(t *testing.T) {
		s := sender(t, safehttp.Options{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		res := s.Deliver(context.Background(), note(redirect.URL+"/hook"))
		require.NotEqual(t, Delivered, res.Outcome)
		require.Contains(t, res.Err, "answered 307")
	})
	require.Zero(t, hits.Load(), "no refused destination was reached")
}

// TestDNSRebinding: a name checked as a URL passes (no literal address to judge), and the
// address it resolves to is refused when dialled, in the dialer's Control hook.
func TestDNSRebinding(t *testing.T) {
	c := safehttp.New(safehttp.Options{Timeout: time.Second})
	_, err := c.CheckURL("https://localhost/hook")
	require.NoError(t, err, "a name is judged by the address dialled, not before")
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://localhost:1/hook", nil)
	require.NoError(t, err)
	_, err = c.Do(context.Background(), req)
	require.ErrorIs(t, err, safehttp.ErrRefused)
}

// TestRetryAndDeadLetter: a 5xx with Retry-After is retried no sooner than it asks, and the last
// allowed attempt is dead-lettered with the answer.
func TestRetryAndDeadLetter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	s := sender(t, safehttp.Options{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	n := note(srv.URL)
	res := s.Deliver(context.Background(), n)
	require.Equal(t, Retried, res.Outcome)
	require.GreaterOrEqual(t, res.Wait, 7*time.Second, "Retry-After is honoured")
	require.Contains(t, res.Err, "answered 503")
	n.Attempts = 2
	res = s.Deliver(context.Background(), n)
	require.Equal(t, Dead, res.Outcome)
	require.Contains(t, res.Err, "down for maintenance")
}

// TestBackoffFullJitter: waits are spread over [0, base·2^(n-1)] and capped.
func TestBackoffFullJitter(t *testing.T) {
	s := sender(t, safehttp.Options{})
	var sum time.Duration
	for range 2000 {
		w := s.jitter(4) // ceiling 80ms
		require.LessOrEqual(t, w, 80*time.Millisecond)
		sum += w
	}
	mean := sum / 2000
	require.InDelta(t, float64(40*time.Millisecond), float64(mean), float64(8*time.Millisecond), "full jitter: uniform over the ceiling")
	require.LessOrEqual(t, s.jitter(60), time.Second, "capped at BackoffMax")
}

// TestBreakerIsolates: once a hanging destination's circuit opens, its notifications are deferred
// without a POST, and another destination is delivered at once.
func TestBreakerIsolates(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer ok.Close()
	s := sender(t, safehttp.Options{AllowHTTP: true, Timeout: 50 * time.Millisecond, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	s.opt.MaxAttempts = 100
	for range s.opt.BreakerFailures {
		require.Equal(t, Retried, s.Deliver(context.Background(), note(hang.URL)).Outcome)
	}
	start := time.Now()
	res := s.Deliver(context.Background(), note(hang.URL))
	require.Equal(t, Deferred, res.Outcome, "the circuit is open")
	require.Less(t, time.Since(start), 20*time.Millisecond, "an open circuit costs no POST")
	require.Equal(t, Delivered, s.Deliver(context.Background(), note(ok.URL)).Outcome)
}

// TestA2ABody: an A2A config's notification POSTs the Task its snapshot renders, signed over those
// bytes, with the config's token and Authorization; a snapshot that renders nothing is
// dead-lettered without a POST.
func TestA2ABody(t *testing.T) {
	type got struct {
		body   []byte
		header http.Header
	}
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{b, r.Header.Clone()}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	s := sender(t, safehttp.Options{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	n := note(srv.URL + "/hook")
	n.Format, n.Token, n.AuthHeader = FormatA2A, "tok", "Bearer cred"
	n.Payload = []byte(`{"turns":[{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"ctx","status":"running","attempts":1,"accepted_at":"2026-12-02T19:00:00Z"}]}`)
	res := s.Deliver(context.Background(), n)
	require.Equal(t, Delivered, res.Outcome, res.Err)
	g := <-seen
	want, err := Body(n, "")
	require.NoError(t, err)
	require.Equal(t, want, g.body)
	var task a2a.Task
	require.NoError(t, json.Unmarshal(g.body, &task))
	require.Equal(t, a2a.TaskStateWorking, task.Status.State)
	require.Equal(t, "tok", g.header.Get(TokenHeader))
	require.Equal(t, "Bearer cred", g.header.Get("Authorization"))
	v, err := standardwebhooks.NewWebhook(config.NotifierSigningSecretDefault)
	require.NoError(t, err)
	require.NoError(t, v.Verify(g.body, g.header), "the signature covers the rendered Task")

	n.Payload = []byte(`{"turns":[]}`)
	res = s.Deliver(context.Background(), n)
	require.Equal(t, Dead, res.Outcome)
	require.Contains(t, res.Err, "render")
	require.Empty(t, seen, "nothing was POSTed")
}

// TestBodyInRegion: in a region every body shows the turn's prefixed ID, the same bytes each time;
// without one the native payload goes as the outbox holds it.
func TestBodyInRegion(t *testing.T) {
	t.Parallel()
	n := note("https://example.com/hook")
	n.Payload = []byte(`{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","status":"running","attempt":1}`)
	plain, err := Body(n, "")
	require.NoError(t, err)
	require.Equal(t, string(n.Payload), string(plain))
	b, err := Body(n, "euw1")
	require.NoError(t, err)
	require.JSONEq(t, `{"turn_id":"euw1-0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","status":"running","attempt":1}`, string(b))
	again, err := Body(n, "euw1")
	require.NoError(t, err)
	require.Equal(t, b, again)

	n.Format = FormatA2A
	n.Payload = []byte(`{"turns":[{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"euw1-ctx","status":"running","attempts":1,"accepted_at":"2026-12-02T19:00:00Z"}]}`)
	b, err = Body(n, "euw1")
	require.NoError(t, err)
	var task a2a.Task
	require.NoError(t, json.Unmarshal(b, &task))
	require.Equal(t, a2a.TaskID("euw1-0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f"), task.ID)
}

// TestA2A10Body: a config created through A2A 1.0 is sent 1.0's StreamResponse carrying the task
// (no kind, 1.0's enums), signed over those bytes; the same row's 0.3 format is the bare Task.
func TestA2A10Body(t *testing.T) {
	t.Parallel()
	n := note("https://example.com/hook")
	n.Format = FormatA2A10
	n.Payload = []byte(`{"turns":[{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"ctx","status":"succeeded","attempts":1,` +
		`"input":{"text":"hi"},"output":{"text":"hello"},"accepted_at":"2026-12-02T19:00:00Z","finished_at":"2026-12-02T19:00:01Z"}]}`)
	b, err := Body(n, "euw1")
	require.NoError(t, err)
	var sr a2apb.StreamResponse
	require.NoError(t, protojson.Unmarshal(b, &sr), string(b))
	require.Equal(t, "euw1-0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f", sr.GetTask().GetId())
	require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, sr.GetTask().GetStatus().GetState())
	require.NotContains(t, string(b), `"kind"`)

	n.Format = FormatA2A
	old, err := Body(n, "euw1")
	require.NoError(t, err)
	var task a2a.Task
	require.NoError(t, json.Unmarshal(old, &task))
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Contains(t, string(old), `"kind":"task"`)
}
