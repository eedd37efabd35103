package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// tenantStack is a whole stack with authentication on whose Postgres is reached through a proxy
// the test can cut, with an API key for each of two tenants.
type tenantStack struct {
	env        *testenv.Env
	base       string
	proxy      *testenv.Proxy
	keyA, keyB string
	cfg        config.Config
}

func startTenantStack(t *testing.T, roles string) *tenantStack {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, keyA, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, keyB, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)
	dsn, err := url.Parse(env.Config.DatabaseURL)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, dsn.Host)
	dsn.Host = proxy.Addr()
	cfg := authConfig(env, roles)
	cfg.DatabaseURL = dsn.String()
	stack := startStackCfg(t, env, cfg)
	return &tenantStack{env: env, base: "http://" + stack.Addr(), proxy: proxy, keyA: keyA, keyB: keyB, cfg: cfg}
}

// tenantAccepted is a 202 body.
type tenantAccepted struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	StreamToken string `json:"stream_token"`
}

func (s *tenantStack) post(t *testing.T, key, session, body string) tenantAccepted {
	t.Helper()
	status, b := post(t, s.base, session, body, map[string]string{"Authorization": "Bearer " + key})
	require.Equal(t, http.StatusAccepted, status, string(b))
	var a tenantAccepted
	require.NoError(t, json.Unmarshal(b, &a))
	return a
}

// turn reads a turn as the tenant of key; ok is false on a 404.
func (s *tenantStack) turn(t *testing.T, key, id string) (tv tenantTurn, ok bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/v1/turns/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return tenantTurn{}, false
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tv))
	return tv, true
}

// tenantTurn is a turn as GET /v1/turns/{id} shows it.
type tenantTurn struct {
	TurnID    string      `json:"turn_id"`
	SessionID string      `json:"session_id"`
	Status    string      `json:"status"`
	Input     wire.Input  `json:"input"`
	Output    wire.Output `json:"output"`
}

func (s *tenantStack) waitSucceeded(t *testing.T, key, id string) tenantTurn {
	t.Helper()
	var tv tenantTurn
	testenv.WaitFor(t, 60*time.Second, "turn "+id+" to succeed", func() bool {
		var ok bool
		tv, ok = s.turn(t, key, id)
		return ok && tv.Status == "succeeded"
	})
	return tv
}

// TestTenantSessionDuringPostgresOutage reproduces issue #28's first run: while Postgres does not
// answer intake, tenant B posts into tenant A's session ID. B must get a session of its own: its
// stream token reads none of A's events, and once Postgres is back B's turn runs with B's empty
// history and A's history is untouched.
func TestTenantSessionDuringPostgresOutage(t *testing.T) {
	t.Parallel()
	s := startTenantStack(t, "intake,worker,gateway")
	const session = "shared-outage"
	// A uses an intake replica of its own, which reaches Postgres throughout: the replica B posts
	// to has never seen A's session.
	cfgA := s.cfg
	cfgA.Roles, cfgA.DatabaseURL = "intake", s.env.Config.DatabaseURL
	intakeA := &tenantStack{base: "http://" + startStackCfg(t, s.env, cfgA).Addr()}
	a := intakeA.post(t, s.keyA, session, `{"input":{"text":"acme confidential"}}`)
	s.waitSucceeded(t, s.keyA, a.TurnID)
	// B's key is looked up once now, while Postgres answers; intake caches it.
	s.post(t, s.keyB, "globex-warm", `{"input":{"text":"warm up"}}`)

	s.proxy.Cut(testenv.Reset)
	b := s.post(t, s.keyB, session, `{"input":{"text":"globex question"}}`)
	require.Equal(t, session, b.SessionID)
	stream := testenv.OpenSSE(t, s.base+"/v1/sessions/"+session+"/events?access_token="+url.QueryEscape(b.StreamToken), "")
	require.Equal(t, http.StatusOK, stream.Resp.StatusCode)
	s.proxy.Restore()

	evs := stream.Until(t, 60*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
	for _, e := range evs {
		require.NotContains(t, e.Data, a.TurnID, "B's stream shows A's events")
		require.NotContains(t, e.Data, "acme confidential")
		require.Contains(t, e.Data, b.TurnID, "B's stream holds B's turn only")
	}
	got := s.waitSucceeded(t, s.keyB, b.TurnID)
	require.Equal(t, session, got.SessionID)

	require.Equal(t, []historyMsg{{1, a.TurnID, "user"}, {2, a.TurnID, "assistant"}},
		history(t, s.env, wire.NewSessionKey("acme", session).String()), "A's history is A's turn alone")
	require.Equal(t, []historyMsg{{1, b.TurnID, "user"}, {2, b.TurnID, "assistant"}},
		history(t, s.env, wire.NewSessionKey("globex", session).String()), "B's turn ran in B's own session, from an empty history")
	_, seen := s.turn(t, s.keyB, a.TurnID)
	require.False(t, seen, "A's turn is not B's to read")
}

// TestTenantClientMintedTurnID reproduces issue #28's second run: tenant B posts with a
// client-minted turn_id equal to tenant A's queued turn. Both turns run, each with its own input
// in its own session, and each tenant reads its own turn under the ID it minted.
func TestTenantClientMintedTurnID(t *testing.T) {
	t.Parallel()
	s := startTenantStack(t, "intake,worker,gateway")
	id := "0190c5d3-0000-7000-8000-00000000a11d"
	// A's turn waits behind a slow one of its session, so it is queued when B's arrives.
	slow := s.post(t, s.keyA, "acme-s", `{"input":{"text":"first"},"metadata":{"demo":{"duration_ms":1500,"tokens":3}}}`)
	a := s.post(t, s.keyA, "acme-s", `{"input":{"text":"acme input"},"turn_id":"`+id+`"}`)
	b := s.post(t, s.keyB, "globex-s", `{"input":{"text":"globex input"},"turn_id":"`+id+`"}`)
	require.Equal(t, id, a.TurnID)
	require.Equal(t, id, b.TurnID)

	s.waitSucceeded(t, s.keyA, slow.TurnID)
	ta := s.waitSucceeded(t, s.keyA, id)
	tb := s.waitSucceeded(t, s.keyB, id)
	require.Equal(t, id, ta.TurnID)
	require.Equal(t, id, tb.TurnID)
	require.Equal(t, "acme input", ta.Input.Text)
	require.Equal(t, "acme-s", ta.SessionID)
	require.Equal(t, "globex input", tb.Input.Text)
	require.Equal(t, "globex-s", tb.SessionID)
	require.Len(t, history(t, s.env, wire.NewSessionKey("acme", "acme-s").String()), 4, "A's session holds both of A's turns")
	require.Len(t, history(t, s.env, wire.NewSessionKey("globex", "globex-s").String()), 2, "B's session holds B's turn")

	// The session's list shows the turn under the ID A minted.
	req, err := http.NewRequest(http.MethodGet, s.base+"/v1/sessions/acme-s/turns", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.keyA)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var page struct {
		Turns []tenantTurn `json:"turns"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	require.Len(t, page.Turns, 2)
	require.Equal(t, id, page.Turns[0].TurnID, "newest first, under the client's ID")

	// Each tenant's stream shows the turn under the ID it minted, with its own input's answer.
	for _, c := range []struct{ key, session, token string }{{s.keyA, "acme-s", a.StreamToken}, {s.keyB, "globex-s", b.StreamToken}} {
		st := testenv.OpenSSE(t, s.base+"/v1/sessions/"+c.session+"/events?turn_id="+id+"&access_token="+url.QueryEscape(c.token), "")
		evs := st.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
		require.Contains(t, evs[len(evs)-1].Data, `"turn_id":"`+id+`"`)
	}
}
