package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// received is one POST a test receiver took.
type received struct {
	WebhookID string
	TurnID    string
	Status    string
	Attempt   int
	Token     string
	At        time.Time
	// Latency is the time from the state change (the payload's updated_at) to the POST's arrival.
	Latency time.Duration
}

// receiver is a webhook receiver that verifies every signature with the Standard Webhooks library
// and answers 400 to a POST whose signature fails, as a receiver should.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	verify *standardwebhooks.Webhook

	// hold is how long it takes to answer after recording a POST: a notifier killed meanwhile
	// never learns of the delivery, so its row is delivered again.
	hold time.Duration

	mu       sync.Mutex
	got      []received
	rejected int
}

func newReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	r := &receiver{t: t, verify: v}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := r.verify.Verify(body, req.Header); err != nil {
		r.mu.Lock()
		r.rejected++
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var p struct {
		TurnID    string    `json:"turn_id"`
		Status    string    `json:"status"`
		Attempt   int       `json:"attempt"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	now := time.Now()
	r.mu.Lock()
	r.got = append(r.got, received{
		WebhookID: req.Header.Get("webhook-id"), TurnID: p.TurnID, Status: p.Status, Attempt: p.Attempt,
		Token: req.Header.Get("X-A2A-Notification-Token"), At: now, Latency: now.Sub(p.UpdatedAt),
	})
	r.mu.Unlock()
	if r.hold > 0 {
		select {
		case <-time.After(r.hold):
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// outboxRow is a turn_notifications row.
type outboxRow struct {
	ID        int64
	TurnID    string
	Status    string
	Delivered bool
	Dead      bool
	LastError string
}

func readOutbox(t *testing.T, env *testenv.Env) []outboxRow {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT id, turn_id::text, status, delivered_at IS NOT NULL,
		dead_at IS NOT NULL, coalesce(last_error, '') FROM turn_notifications ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.ID, &r.TurnID, &r.Status, &r.Delivered, &r.Dead, &r.LastError))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// notifierEnv is the notifier's settings for tests: loopback receivers over http, short leases so
// a killed notifier's rows move on quickly, fast retries.
func notifierEnv() []string {
	return []string{
		"TURNSTILE_NOTIFIER_ALLOW_HTTP=true",
		"TURNSTILE_NOTIFIER_ALLOW_NETWORKS=127.0.0.0/8,::1/128",
		"TURNSTILE_NOTIFIER_LEASE=2s",
		"TURNSTILE_NOTIFIER_TIMEOUT=1s",
		"TURNSTILE_NOTIFIER_POLL=20ms",
		"TURNSTILE_NOTIFIER_BACKOFF_BASE=50ms",
		"TURNSTILE_NOTIFIER_BACKOFF_MAX=500ms",
		"TURNSTILE_NOTIFIER_MAX_ATTEMPTS=1000",
	}
}

// postWebhookTurn posts a turn with a webhook and returns its ID.
func postWebhookTurn(t *testing.T, base, session, text, url, token string) string {
	t.Helper()
	return postTurnWith(t, base, session, map[string]any{
		"input":    map[string]string{"text": text},
		"metadata": demoMeta(20),
		"webhook":  map[string]string{"url": url, "token": token},
	})
}

// TestNotifierKilled runs two notifier processes while one is SIGKILLed and restarted every two
// seconds and 200 turns with a webhook go through their states. Every outbox row Postgres holds
// must reach the receiver at least once (zero lost), signed, per turn in the order of the rows;
// duplicates share a webhook-id and a body; every turn's last notification is its final status.
func TestNotifierKilled(t *testing.T) {
	const turns = 200
	env := testenv.New(t, testenv.Options{Partitions: 4})
	recv := newReceiver(t, config.NotifierSigningSecretDefault)
	// Two notifiers with 4 slots each at 100ms a POST: the 400 deliveries take several seconds, so
	// kills land on deliveries in flight.
	recv.hold = 100 * time.Millisecond

	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	frontAddr := testenv.FreeAddr(t)
	frontEnv := append(env.Environ("broker,intake,worker,gateway", frontAddr, "front"),
		"TURNSTILE_BROKER_ADDR="+brokerAddr, "TURNSTILE_NOTIFIER_ALLOW_HTTP=true")
	testenv.StartProcess(t, "front", frontEnv, frontAddr)
	base := "http://" + frontAddr

	gen := 0
	start := func(name string) *testenv.Process {
		gen++
		addr := testenv.FreeAddr(t)
		instance := fmt.Sprintf("%s-g%d", name, gen)
		e := append(append(env.Environ("notifier", addr, instance), notifierEnv()...), "TURNSTILE_MIGRATE=off")
		return testenv.StartProcess(t, instance, e, addr)
	}
	start("n1") // stays up throughout
	victim := start("n2")

	ids := make([]string, 0, turns)
	var posting sync.WaitGroup
	var mu sync.Mutex
	for s := range 20 {
		posting.Go(func() {
			for i := range turns / 20 {
				id := postWebhookTurn(t, base, fmt.Sprintf("notify-%d", s), fmt.Sprintf("turn %d of %d", i, s), recv.srv.URL+"/hook", "tok-"+strconv.Itoa(s))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}

	// Kill and restart the victim every two seconds until every turn ended and its outbox drained.
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	drained := func() bool {
		var open, finished int
		err := env.Pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM turn_notifications WHERE delivered_at IS NULL AND dead_at IS NULL),
			(SELECT count(*) FROM turns WHERE finished_at IS NOT NULL)`).Scan(&open, &finished)
		return err == nil && open == 0 && finished == turns
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for kills < 5 || !drained() {
		require.True(t, time.Now().Before(deadline), "the outbox did not drain: %d kills", kills)
		<-tick.C
		require.NoError(t, victim.Signal(syscall.SIGKILL))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = victim.Wait(ctx)
		cancel()
		kills++
		victim = start("n2")
	}
	posting.Wait()
	require.Len(t, ids, turns)

	rows := readOutbox(t, env)
	got := recv.all()
	t.Logf("%d kills; %d outbox rows; %d POSTs received (%d duplicates); %d rejected signatures",
		kills, len(rows), len(got), len(got)-len(rows), recv.rejected)
	require.Zero(t, recv.rejected, "every POST is signed with the secret")
	require.Greater(t, len(got), len(rows), "kills caught deliveries in flight, delivered again")

	// Zero lost: every row Postgres holds reached the receiver, and none was given up.
	byID := map[string]received{}
	for _, g := range got {
		if prev, dup := byID[g.WebhookID]; dup {
			require.Equal(t, prev.Status, g.Status, "a duplicate carries the webhook-id and the body of its first delivery")
			require.Equal(t, prev.TurnID, g.TurnID)
			require.Equal(t, prev.Attempt, g.Attempt)
			continue
		}
		byID[g.WebhookID] = g
	}
	lost := 0
	lastStatus := map[string]string{}
	for _, r := range rows {
		require.True(t, r.Delivered, "row %d: %s", r.ID, r.LastError)
		require.False(t, r.Dead)
		if _, ok := byID[fmt.Sprintf("msg_%d", r.ID)]; !ok {
			lost++
		}
		lastStatus[r.TurnID] = r.Status
	}
	require.Zero(t, lost, "lost updates")
	require.Len(t, byID, len(rows), "no POST without its row")

	// Every state change has its row: each turn's rows end with the status Postgres records.
	var finals []struct{ id, status string }
	trows, err := env.Pool.Query(context.Background(), `SELECT turn_id::text, status FROM turns`)
	require.NoError(t, err)
	for trows.Next() {
		var f struct{ id, status string }
		require.NoError(t, trows.Scan(&f.id, &f.status))
		finals = append(finals, f)
	}
	require.NoError(t, trows.Err())
	require.Len(t, finals, turns)
	var withHook, inMeta int
	require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE webhook_url IS NOT NULL),
		count(*) FILTER (WHERE metadata ? 'turnstile.webhook') FROM turns`).Scan(&withHook, &inMeta))
	require.Equal(t, turns, withHook, "every turn stores its webhook")
	require.Zero(t, inMeta, "the webhook (and its token) is moved out of the metadata")
	for _, f := range finals {
		require.Equal(t, f.status, lastStatus[f.id], "turn %s: its last notification is its final state", f.id)
	}

	// Per turn in order: the receiver saw each turn's rows in ascending order (a duplicate repeats
	// the latest row, never an older one after a newer one).
	seen := map[string]int64{}
	for _, g := range got {
		n, err := strconv.ParseInt(strings.TrimPrefix(g.WebhookID, "msg_"), 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, seen[g.TurnID], "turn %s: %s after a newer notification", g.TurnID, g.WebhookID)
		seen[g.TurnID] = n
		require.True(t, strings.HasPrefix(g.Token, "tok-"), "the registered token comes back")
	}
}

// TestNotifierSignature checks the receiver's side of the signature with the Standard Webhooks
// library: a delivered POST verifies, and the same headers over a tampered body do not.
func TestNotifierSignature(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	v, err := standardwebhooks.NewWebhook(config.NotifierSigningSecretDefault)
	require.NoError(t, err)
	type capture struct {
		body   []byte
		header http.Header
	}
	got := make(chan capture, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- capture{b, r.Header.Clone()}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	cfg := env.Config
	cfg.Notifier.AllowHTTP = true
	cfg.Notifier.AllowNetworks = "127.0.0.0/8"
	cfg.Notifier.Poll = 20 * time.Millisecond
	cfg.Roles = "intake,worker,gateway,notifier"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	id := postWebhookTurn(t, base, "sig", "sign me", srv.URL, "secret-token")

	var c capture
	select {
	case c = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no notification arrived")
	}
	require.NoError(t, v.Verify(c.body, c.header), "the library verifies the signature")
	require.Equal(t, "secret-token", c.header.Get("X-A2A-Notification-Token"))
	require.Contains(t, string(c.body), id)
	tampered := bytes.Replace(c.body, []byte(`"status"`), []byte(`"status" `), 1)
	require.NotEqual(t, c.body, tampered)
	require.Error(t, v.Verify(tampered, c.header), "a tampered body fails verification")
	other := c.header.Clone()
	other.Set("webhook-id", "msg_0")
	require.Error(t, v.Verify(c.body, other), "another webhook-id fails verification")

	// A refused destination is dead-lettered with its reason, visible through the API and a metric.
	refused := postWebhookTurn(t, base, "sig", "to a private address", "https://10.0.0.1/hook", "")
	type notifications struct {
		Notifications []struct {
			WebhookID string `json:"webhook_id"`
			Status    string `json:"status"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"notifications"`
	}
	var ns notifications
	testenv.WaitFor(t, 30*time.Second, "the refused turn's notifications to be dead-lettered", func() bool {
		ns = notifications{}
		return getJSON(t, base+"/v1/turns/"+refused+"/notifications", &ns) == http.StatusOK &&
			len(ns.Notifications) == 2 && ns.Notifications[1].State == "dead"
	})
	require.Equal(t, "running", ns.Notifications[0].Status)
	require.Equal(t, "dead", ns.Notifications[0].State)
	require.Contains(t, ns.Notifications[0].LastError, "not a public address")
	testenv.WaitFor(t, 10*time.Second, "the dead-letter gauge", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "turnstile_notifier_dead_letters 2")
	})
	ns = notifications{}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+id+"/notifications", &ns))
	require.NotEmpty(t, ns.Notifications)
	require.Equal(t, "delivered", ns.Notifications[0].State)
}

// p99 is the 99th percentile of the latencies.
func p99(lat []time.Duration) time.Duration {
	s := append([]time.Duration(nil), lat...)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// TestNotifierHangingReceiver compares, in one stack, rounds of the same load: turns whose webhook
// is a healthy receiver, beside as many turns whose webhook is a second receiver — answering at
// once ("alone") or hanging until the notifier's timeout ("beside"). Both post, claim and notify
// the same number of turns, so the only difference is the hanging receiver. The rounds are
// interleaved three times (the hanging receiver is let go and the outbox drained after each
// "beside", so an "alone" round is alone), and the median of the healthy receiver's delivery p99
// (state change to arrival) beside the hanging one must stay within twice the median alone: one
// round's p99 is its second-slowest delivery, a single pause on a shared machine.
func TestNotifierHangingReceiver(t *testing.T) {
	const perRun, rounds = 60, 3
	env := testenv.New(t, testenv.Options{})
	healthy := newReceiver(t, config.NotifierSigningSecretDefault)
	other := newReceiver(t, config.NotifierSigningSecretDefault)
	var (
		hung    atomic.Int64
		hanging atomic.Bool
		mu      sync.Mutex
		release = make(chan struct{})
	)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hanging.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		hung.Add(1)
		mu.Lock()
		ch := release
		mu.Unlock()
		select {
		case <-ch:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	letGo := func() {
		hanging.Store(false)
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
	}
	t.Cleanup(letGo)

	cfg := env.Config
	cfg.Notifier.AllowHTTP = true
	cfg.Notifier.AllowNetworks = "127.0.0.0/8"
	cfg.Notifier.Poll = 20 * time.Millisecond
	cfg.Notifier.Timeout = time.Second
	cfg.Notifier.Lease = 3 * time.Second
	cfg.Notifier.BackoffBase = 100 * time.Millisecond
	cfg.Roles = "intake,worker,gateway,notifier"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()

	run := func(name string, withHanging bool) time.Duration {
		from := len(healthy.all())
		hanging.Store(withHanging)
		var wg sync.WaitGroup
		for s := range 10 {
			wg.Go(func() {
				for i := range perRun / 10 {
					postWebhookTurn(t, base, fmt.Sprintf("%s-ok-%d", name, s), fmt.Sprintf("turn %d", i), healthy.srv.URL, "ok")
					second := other.srv.URL
					if withHanging {
						second = hang.URL
					}
					postWebhookTurn(t, base, fmt.Sprintf("%s-second-%d", name, s), fmt.Sprintf("turn %d", i), second, "second")
				}
			})
		}
		wg.Wait()
		testenv.WaitFor(t, time.Minute, "the healthy receiver's notifications", func() bool {
			return len(healthy.all())-from >= 2*perRun
		})
		var lat []time.Duration
		for _, g := range healthy.all()[from:] {
			lat = append(lat, g.Latency)
		}
		if withHanging {
			letGo()
			testenv.WaitFor(t, time.Minute, "the outbox to drain after the hanging round", func() bool {
				return openNotifications(t, env) == 0
			})
		}
		return p99(lat)
	}
	run("warm", false) // connections, plans and caches: not what is compared
	var alone, beside []time.Duration
	for r := range rounds {
		alone = append(alone, run(fmt.Sprintf("alone%d", r), false))
		beside = append(beside, run(fmt.Sprintf("beside%d", r), true))
	}
	slices.Sort(alone)
	slices.Sort(beside)
	t.Logf("healthy receiver p99 by round: %v alone, %v beside a hanging receiver (%d hanging POSTs)", alone, beside, hung.Load())
	require.Positive(t, hung.Load(), "the hanging receiver was tried")
	require.LessOrEqual(t, beside[rounds/2], 2*alone[rounds/2], "a hanging receiver slows only its own deliveries (medians)")
}

// TestNotifierPostgresOutage cuts the notifier off from Postgres for 10 s while turns go on
// changing state (the front process reaches Postgres directly): nothing is lost, and deliveries
// resume once Postgres is back.
func TestNotifierPostgresOutage(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 2})
	recv := newReceiver(t, config.NotifierSigningSecretDefault)
	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	frontAddr := testenv.FreeAddr(t)
	testenv.StartProcess(t, "front", append(env.Environ("broker,intake,worker,gateway", frontAddr, "front"),
		"TURNSTILE_BROKER_ADDR="+brokerAddr, "TURNSTILE_NOTIFIER_ALLOW_HTTP=true"), frontAddr)
	base := "http://" + frontAddr

	dsn, err := url.Parse(env.Config.DatabaseURL)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, dsn.Host)
	dsn.Host = proxy.Addr()
	addr := testenv.FreeAddr(t)
	testenv.StartProcess(t, "notifier", append(append(env.Environ("notifier", addr, "notifier"), notifierEnv()...),
		"TURNSTILE_MIGRATE=off", "TURNSTILE_DATABASE_URL="+dsn.String()), addr)

	post := func(from, n int) {
		for i := from; i < from+n; i++ {
			postWebhookTurn(t, base, fmt.Sprintf("pg-%d", i%5), fmt.Sprintf("turn %d", i), recv.srv.URL, "tok-pg")
		}
	}
	post(0, 10)
	testenv.WaitFor(t, 30*time.Second, "deliveries before the outage", func() bool { return len(recv.all()) >= 5 })

	proxy.Cut(testenv.Reset)
	cutAt := time.Now()
	post(10, 20)
	testenv.WaitFor(t, 30*time.Second, "turns to finish during the outage", func() bool {
		var finished int
		err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns WHERE finished_at IS NOT NULL`).Scan(&finished)
		return err == nil && finished == 30
	})
	duringOutage := len(recv.all())
	// The notifier cannot claim anything while Postgres is away; wait out the 10 s.
	<-time.After(time.Until(cutAt.Add(10 * time.Second)))
	require.LessOrEqual(t, len(recv.all())-duringOutage, 0, "no claim succeeds without Postgres")
	proxy.Restore()
	restoredAt := time.Now()
	post(30, 10)

	testenv.WaitFor(t, 60*time.Second, "the outbox to drain after Postgres is back", func() bool {
		var open, finished int
		err := env.Pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM turn_notifications WHERE delivered_at IS NULL AND dead_at IS NULL),
			(SELECT count(*) FROM turns WHERE finished_at IS NOT NULL)`).Scan(&open, &finished)
		return err == nil && open == 0 && finished == 40
	})
	rows := readOutbox(t, env)
	got := map[string]bool{}
	resumed := 0
	for _, g := range recv.all() {
		got[g.WebhookID] = true
		if g.At.After(restoredAt) {
			resumed++
		}
	}
	lost := 0
	for _, r := range rows {
		require.True(t, r.Delivered, "row %d: %s", r.ID, r.LastError)
		if !got[fmt.Sprintf("msg_%d", r.ID)] {
			lost++
		}
	}
	t.Logf("%d rows; %d POSTs, %d of them after Postgres was back; %d lost", len(rows), len(recv.all()), resumed, lost)
	require.Equal(t, 80, len(rows), "two notifications per turn (running, succeeded)")
	require.Zero(t, lost)
	require.GreaterOrEqual(t, resumed, 60-duringOutage, "the outage's backlog was delivered after it")
}
