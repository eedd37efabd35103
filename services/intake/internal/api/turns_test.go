package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/openapi"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func getTurn(t testing.TB, base, id string, hdr map[string]string) (turnstore.Turn, response) {
	t.Helper()
	resp := do(t, base, request{Method: http.MethodGet, Path: "/v1/turns/" + id, Header: hdr})
	var tv turnstore.Turn
	if resp.Status == http.StatusOK {
		resp.JSON(t, &tv)
	}
	return tv, resp
}

// markRunning makes a turn look claimed by a worker.
func (b *bundle) markRunning(t testing.TB, id string) {
	t.Helper()
	b.recorder.Flush(context.Background()) // the queued row is written asynchronously
	tag, err := b.env.Pool.Exec(context.Background(), `UPDATE turns SET status = 'running', attempt = 1,
		started_at = now(), lease_owner = 'w', lease_expires_at = now() + interval '1 minute' WHERE turn_id = $1`, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

// TestQueuedRowAndStatus: an accepted turn is readable as queued at once (its row is recorded after
// Kafka acknowledged it), under the session's key (its tenant and ID).
func TestQueuedRowAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	a := accepted(t, postTurn(t, b.srv.URL, "st", `{"input":{"text":"status please"},"metadata":{"k":"v"}}`, nil))
	tv, resp := getTurn(t, b.srv.URL, a.TurnID, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, wire.StatusQueued, tv.Status)
	require.Equal(t, "st", tv.SessionID)
	require.Zero(t, tv.Attempt)
	var key, tenant string
	require.NoError(t, b.env.Pool.QueryRow(context.Background(), `SELECT session_id, tenant FROM turns WHERE turn_id = $1`, a.TurnID).Scan(&key, &tenant))
	require.Equal(t, wire.NewSessionKey(wire.DefaultTenant, "st").String(), key, "stored under the session's key")
	require.Equal(t, wire.DefaultTenant, tenant)

	_, resp = getTurn(t, b.srv.URL, uuid.NewString(), nil)
	require.Equal(t, http.StatusNotFound, resp.Status)
	require.Equal(t, httpx.ProblemTurnNotFound.Name, resp.ProblemType(t))
	_, resp = getTurn(t, b.srv.URL, "not-a-uuid", nil)
	require.Equal(t, http.StatusBadRequest, resp.Status)
}

// TestMultitask: reject refuses while the session has a queued or running turn; interrupt requests
// cancellation of the running one (and of queued ones before it) and is accepted.
func TestMultitask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := accepted(t, postTurn(t, b.srv.URL, "mt", turnBody, nil))

	resp := postTurn(t, b.srv.URL, "mt", `{"input":{"text":"again"},"multitask":"reject"}`, nil)
	require.Equal(t, http.StatusConflict, resp.Status, "queued turn: %s", resp.Body)
	require.Equal(t, httpx.ProblemSessionBusy.Name, resp.ProblemType(t))
	b.markRunning(t, first.TurnID)
	resp = postTurn(t, b.srv.URL, "mt", `{"input":{"text":"again"},"multitask":"reject"}`, nil)
	require.Equal(t, http.StatusConflict, resp.Status, "running turn: %s", resp.Body)
	require.EqualValues(t, 1, b.recordsInKafka(t))
	// Another session is not busy.
	accepted(t, postTurn(t, b.srv.URL, "mt-other", `{"input":{"text":"x"},"multitask":"reject"}`, nil))

	second := accepted(t, postTurn(t, b.srv.URL, "mt", `{"input":{"text":"stop that"},"multitask":"interrupt"}`, nil))
	tv, _ := getTurn(t, b.srv.URL, first.TurnID, nil)
	require.True(t, tv.CancelReq, "interrupt must request cancellation of the running turn")
	tv, _ = getTurn(t, b.srv.URL, second.TurnID, nil)
	require.False(t, tv.CancelReq, "the interrupting turn itself runs")
	require.Equal(t, wire.StatusQueued, tv.Status)
}

// TestCancel: 202 for queued, running and finished turns, idempotent, never refused for capacity;
// a queued turn ends cancelled at once.
func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.MaxBacklogAge = time.Second }})
	a := accepted(t, postTurn(t, b.srv.URL, "cx", turnBody, nil))
	b.backlog.Store(int64(time.Hour)) // intake refuses new turns for capacity ...
	require.Equal(t, http.StatusServiceUnavailable, postTurn(t, b.srv.URL, "cx", turnBody, nil).Status)

	cancel := func(id string) CancelAccepted {
		resp := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/turns/" + id + "/cancel"})
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body)) // ... but never cancels
		var c CancelAccepted
		resp.JSON(t, &c)
		return c
	}
	c := cancel(a.TurnID)
	require.True(t, c.CancelRequested)
	require.Equal(t, "cancelled", c.Status, "a queued turn's cancel is terminal at once")
	require.Equal(t, c, cancel(a.TurnID), "cancel is idempotent")

	run := accepted(t, postTurnAdmitted(t, b, "cx"))
	b.markRunning(t, run.TurnID)
	c = cancel(run.TurnID)
	require.True(t, c.CancelRequested)
	require.Equal(t, "running", c.Status, "a running turn stops at its worker's next lease renewal")

	done := uuid.New()
	_, err := b.env.Pool.Exec(context.Background(), `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, finished_at)
		VALUES ($1, 'cx', 'default', 'succeeded', now(), now())`, done)
	require.NoError(t, err)
	c = cancel(done.String())
	require.False(t, c.CancelRequested)
	require.Equal(t, "succeeded", c.Status)

	resp := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/turns/" + uuid.NewString() + "/cancel"})
	require.Equal(t, http.StatusNotFound, resp.Status)
}

// TestListSessionTurns pages a session's turns newest first.
func TestListSessionTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var ids []string
	for i := range 5 {
		ids = append(ids, accepted(t, postTurn(t, b.srv.URL, "ls", fmt.Sprintf(`{"input":{"text":"n%d"}}`, i), nil)).TurnID)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/sessions/ls/turns?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp := do(t, b.srv.URL, request{Method: http.MethodGet, Path: path})
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		var p TurnPage
		resp.JSON(t, &p)
		require.LessOrEqual(t, len(p.Turns), 2)
		for _, tv := range p.Turns {
			got = append(got, tv.TurnID)
			// No worker claimed these turns: the queued row holds the input all the same.
			require.Equal(t, wire.StatusQueued, tv.Status)
			require.Regexp(t, `^\{"text": ?"n[0-4]"\}$`, string(tv.Input), "the list shows an unclaimed turn's input")
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
		require.Less(t, page, 5)
	}
	want := make([]string, len(ids))
	for i, id := range ids {
		want[len(ids)-1-i] = id
	}
	require.Equal(t, want, got)

	resp := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/ls/turns?cursor=%21%21", Unvalidated: true})
	require.Equal(t, http.StatusBadRequest, resp.Status)
	require.Equal(t, httpx.ProblemInvalidCursor.Name, resp.ProblemType(t))
	resp = do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/unknown/turns"})
	require.Equal(t, http.StatusNotFound, resp.Status)
}

// TestTenants: API keys map to tenants; a session ID names the tenant's own session, so two tenants
// using one ID have a session each; another tenant's turn and cancel answer 404; a missing or
// revoked key is a 401.
func TestTenants(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.AuthEnabled = true }})
	ctx := context.Background()
	acmeID, acmeKey, err := apikey.Create(ctx, b.env.Pool, "acme")
	require.NoError(t, err)
	globexID, globexKey, err := apikey.Create(ctx, b.env.Pool, "globex")
	require.NoError(t, err)
	acme := map[string]string{"Authorization": "Bearer " + acmeKey}
	globex := map[string]string{"Authorization": "Bearer " + globexKey}

	resp := postTurn(t, b.srv.URL, "shared", turnBody, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	require.Equal(t, httpx.ProblemUnauthenticated.Name, resp.ProblemType(t))
	resp = postTurn(t, b.srv.URL, "shared", turnBody, map[string]string{"Authorization": "Bearer ts_nope_nope"})
	require.Equal(t, http.StatusUnauthorized, resp.Status)

	a := accepted(t, postTurn(t, b.srv.URL, "shared", turnBody, acme))
	claims, err := b.signer.Verify(a.StreamToken, "shared")
	require.NoError(t, err)
	require.Equal(t, "acme", claims.Tenant)
	require.Equal(t, acmeID, claims.APIKeyID, "the token names its API key, so revoking the key ends it")

	resp = do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/shared/turns", Header: globex})
	require.Equal(t, http.StatusNotFound, resp.Status, "globex has no session of that ID yet")
	// The same session ID is globex's own session: accepted, in Kafka under its own key, with a
	// token for globex's session only.
	gs := accepted(t, postTurn(t, b.srv.URL, "shared", turnBody, globex))
	claims, err = b.signer.Verify(gs.StreamToken, "shared")
	require.NoError(t, err)
	require.Equal(t, "globex", claims.Tenant)
	var keys []string
	for _, rec := range b.turnRecords(t, 2) {
		keys = append(keys, string(rec.Key))
	}
	require.ElementsMatch(t, []string{wire.NewSessionKey("acme", "shared").String(), wire.NewSessionKey("globex", "shared").String()}, keys)
	_, resp = getTurn(t, b.srv.URL, a.TurnID, globex)
	require.Equal(t, http.StatusNotFound, resp.Status, "another tenant's turn")
	resp = do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/turns/" + a.TurnID + "/cancel", Header: globex})
	require.Equal(t, http.StatusNotFound, resp.Status, "another tenant's cancel")
	for _, c := range []struct {
		hdr  map[string]string
		want string
	}{{acme, a.TurnID}, {globex, gs.TurnID}} {
		resp = do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/shared/turns", Header: c.hdr})
		require.Equal(t, http.StatusOK, resp.Status)
		var p TurnPage
		resp.JSON(t, &p)
		require.Len(t, p.Turns, 1, "each tenant lists its own session of the ID")
		require.Equal(t, c.want, p.Turns[0].TurnID)
		require.Equal(t, "shared", p.Turns[0].SessionID)
	}
	tv, resp := getTurn(t, b.srv.URL, a.TurnID, acme)
	require.Equal(t, http.StatusOK, resp.Status)
	require.False(t, tv.CancelReq, "globex's cancel changed nothing")

	// The key namespace of idempotency is per tenant: the same key in globex's own session is its own turn.
	g := accepted(t, postTurn(t, b.srv.URL, "globex-own", turnBody, globex))
	require.NotEqual(t, a.TurnID, g.TurnID)

	require.NoError(t, apikey.Revoke(ctx, b.env.Pool, globexID))
	b.h.keys.expireAll() // as keyTTL passing does
	resp = postTurn(t, b.srv.URL, "globex-own", turnBody, globex)
	require.Equal(t, http.StatusUnauthorized, resp.Status, "a revoked key stops working")
}

// TestOpenAPIServed: intake serves the embedded document, and it is a valid OpenAPI 3.1 document.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.AuthEnabled = true }})
	resp := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/openapi.yaml"})
	require.Equal(t, http.StatusOK, resp.Status, "served without an API key")
	require.Equal(t, string(openapi.Spec), string(resp.Body))
	require.Contains(t, string(resp.Body), "openapi: 3.1.0")
}

// postTurnAdmitted posts a turn while the backlog reads as empty, then restores it.
func postTurnAdmitted(t *testing.T, b *bundle, session string) response {
	t.Helper()
	prev := b.backlog.Swap(0)
	defer b.backlog.Store(prev)
	return postTurn(t, b.srv.URL, session, turnBody, nil)
}

// TestAuthSchemeCaseInsensitive: the Authorization scheme is matched case-insensitively (RFC 9110),
// as the gateway matches it.
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.AuthEnabled = true }})
	_, key, err := apikey.Create(context.Background(), b.env.Pool, "acme")
	require.NoError(t, err)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		resp := postTurn(t, b.srv.URL, "scheme-"+scheme, turnBody, map[string]string{"Authorization": scheme + " " + key})
		require.Equal(t, http.StatusAccepted, resp.Status, "scheme %q: %s", scheme, resp.Body)
	}
	resp := postTurn(t, b.srv.URL, "scheme-basic", turnBody, map[string]string{"Authorization": "Basic " + key})
	require.Equal(t, http.StatusUnauthorized, resp.Status)
}

// TestUnknownKeysBounded: a flood of unknown API keys cannot each cost a Postgres lookup. A key
// without the shape of a real one is refused without a lookup; once the replica's budget of lookups
// that missed is spent, unknown keys are answered 503 without one, and a cached key keeps working.
func TestUnknownKeysBounded(t *testing.T) {
	t.Parallel()
	frozen := time.Now() // no refill of the budget during the test
	b := setup(t, options{cfg: func(c *Config) { c.AuthEnabled, c.KeyMissRate = true, 2 }, now: func() time.Time { return frozen }})
	_, key, err := apikey.Create(context.Background(), b.env.Pool, "acme")
	require.NoError(t, err)
	good := map[string]string{"Authorization": "Bearer " + key}
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "flood", turnBody, good).Status)

	bad := func(i int) map[string]string {
		return map[string]string{"Authorization": fmt.Sprintf("Bearer ts_%012x_%s", i, strings.Repeat("A", 43))}
	}
	var statuses []int
	for i := range 4 {
		statuses = append(statuses, postTurn(t, b.srv.URL, "flood", turnBody, bad(i)).Status)
	}
	require.Equal(t, []int{401, 401, 503, 503}, statuses, "two lookups that miss, then none")
	resp := postTurn(t, b.srv.URL, "flood", turnBody, map[string]string{"Authorization": "Bearer not-a-key"})
	require.Equal(t, http.StatusUnauthorized, resp.Status, "a malformed key needs no lookup")
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "flood", turnBody, good).Status, "a cached key keeps working")
}

// TestUnknownKeyFloodLocksOutNoOne: one client address flooding well-formed unknown keys for
// longer than the key cache lives spends only its own budget of lookups that miss (answered 429
// past it), so real keys this replica has never seen are looked up and answered throughout.
func TestUnknownKeyFloodLocksOutNoOne(t *testing.T) {
	t.Parallel()
	const keyTTL = 200 * time.Millisecond
	b := setup(t, options{cfg: func(c *Config) {
		c.AuthEnabled, c.KeyMissRate, c.KeyMissPerClient = true, 20, 3
		c.KeyTTL, c.KeyMissTTL = keyTTL, 50*time.Millisecond
		// httptest serves on loopback: X-Forwarded-For names the client, as behind an ingress.
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}})
	var keys []string // one new, uncached key for each life of the key cache
	const lives = 8
	for range lives {
		_, key, err := apikey.Create(context.Background(), b.env.Pool, "acme")
		require.NoError(t, err)
		keys = append(keys, key)
	}
	get := func(auth, client string) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.srv.URL+"/v1/sessions/flood/turns", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	flooding, flooded := make(chan struct{}), make(chan map[int]int)
	go func() {
		seen := map[int]int{}
		for i := 0; ; i++ {
			select {
			case <-flooding:
				flooded <- seen
				return
			default:
			}
			seen[get(fmt.Sprintf("ts_%012x_%s", i, strings.Repeat("B", 43)), "203.0.113.9")]++
		}
	}()
	// Eight lives of the key cache, a key never seen before in each, while the flood goes on.
	start, answers := time.Now(), map[int]int{}
	for life := time.Duration(0); life < lives; life = time.Since(start) / keyTTL {
		answers[get(keys[life], "198.51.100.7")]++
	}
	close(flooding)
	seen := <-flooded
	// 404: authenticated, then told the session has no turns; never 401, 429 or 503.
	require.Equal(t, []int{http.StatusNotFound}, slices.Collect(maps.Keys(answers)), "the real tenant is answered throughout: %v", answers)
	require.Positive(t, seen[http.StatusTooManyRequests], "the flooding address is held to its own budget: %v", seen)
	require.Zero(t, seen[http.StatusServiceUnavailable], "one address cannot spend the replica's budget: %v", seen)
	require.LessOrEqual(t, seen[http.StatusUnauthorized], 3+int(3*time.Since(start).Seconds())+1,
		"lookups that missed stay within the address's rate: %v", seen)
}

// TestAcceptsAfterTopicRecreated: the turns topic deleted and created again (on a real Kafka, or a
// restarted embedded broker seen by an intake of another process) is a new incarnation that the
// producer refuses until the topic is purged from it. Intake purges it and produces again, so the
// next turn is accepted rather than every turn answered 503 until a restart.
func TestAcceptsAfterTopicRecreated(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	accepted(t, postTurn(t, b.srv.URL, "rc", `{"input":{"text":"before"}}`, nil))

	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.env.Config.BrokerList()...))
	require.NoError(t, err)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	del, err := adm.DeleteTopics(ctx, b.env.Config.Topic)
	require.NoError(t, err)
	require.NoError(t, del.Error())
	testenv.WaitFor(t, 30*time.Second, "the topic to be created again", func() bool {
		created, err := adm.CreateTopic(ctx, 2, -1, nil, b.env.Config.Topic)
		return err == nil && created.Err == nil // a real Kafka deletes in the background
	})
	// A 503 says to retry with the same Idempotency-Key (the producer may meet the recreation
	// only after its produce timeout, at its next metadata refresh); the retry is accepted.
	var r response
	testenv.WaitFor(t, 30*time.Second, "a turn accepted by the new incarnation", func() bool {
		r = postTurn(t, b.srv.URL, "rc", `{"input":{"text":"after"}}`, map[string]string{"Idempotency-Key": "rc-after"})
		return r.Status != http.StatusServiceUnavailable
	})
	a := accepted(t, r)
	recs := b.turnRecords(t, 1)
	env := decodeEnvelope(t, recs[0].Value)
	require.Equal(t, a.TurnID, env.ShownTurnID(), "the turn went to the new incarnation")
}
