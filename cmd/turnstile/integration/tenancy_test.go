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
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestCrossTenantStream runs the whole stack with authentication on: each tenant's 202 carries a
// stream token for its own session, the gateway streams that session with it, and another
// tenant's token for the same session answers 404 (the session looks missing), a missing or forged
// token 401 — whether the token comes as a Bearer header or as access_token (EventSource's way).
func TestCrossTenantStream(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, keyA, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, keyB, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)

	cfg := authConfig(env, "intake,worker,gateway")
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()

	postAs := func(key, session string) (turnID, token string) {
		status, body := post(t, base, session, `{"input":{"text":"hello"}}`, map[string]string{"Authorization": "Bearer " + key})
		require.Equal(t, http.StatusAccepted, status, string(body))
		var a struct {
			TurnID      string `json:"turn_id"`
			StreamToken string `json:"stream_token"`
		}
		require.NoError(t, json.Unmarshal(body, &a))
		require.NotEmpty(t, a.StreamToken)
		return a.TurnID, a.StreamToken
	}
	turnA, tokenA := postAs(keyA, "tenancy-a")
	_, tokenB := postAs(keyB, "tenancy-b")

	// The owner follows its turn to the end with the token in the query, as a browser would.
	stream := testenv.OpenSSE(t, base+"/v1/sessions/tenancy-a/events?turn_id="+turnA+"&access_token="+url.QueryEscape(tokenA), "")
	require.Equal(t, http.StatusOK, stream.Resp.StatusCode)
	evs := stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
	require.Equal(t, "turn.started", evs[0].Type)

	status := func(session, bearer, query string) int {
		u := base + "/v1/sessions/" + session + "/events?last_event_id=$"
		if query != "" {
			u += "&access_token=" + url.QueryEscape(query)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		}
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNotFound, status("tenancy-a", tokenB, ""), "another tenant's token must not open the stream")
	require.Equal(t, http.StatusNotFound, status("tenancy-a", "", tokenB))
	require.Equal(t, http.StatusUnauthorized, status("tenancy-a", "", ""))
	require.Equal(t, http.StatusUnauthorized, status("tenancy-a", tokenA+"x", ""))
	require.Equal(t, http.StatusUnauthorized, status("tenancy-a", keyA, ""), "an API key is not a stream token")

	// Turn status and cancel of another tenant's turn look missing too.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/turns/"+turnA, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+keyB)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestTenancyRevokedKeyEndsStreams reproduces the seen run with TURNSTILE_AUTH=on: after the API
// key is revoked (in Postgres, as `turnstile apikey revoke` does), its open stream ends with
// stream.revoked within seconds and a new stream with the same token is refused with 401.
func TestTenancyRevokedKeyEndsStreams(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, key, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	cfg := authConfig(env, "intake,worker,gateway")
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()

	status, body := post(t, base, "revoked", `{"input":{"text":"hello"}}`, map[string]string{"Authorization": "Bearer " + key})
	require.Equal(t, http.StatusAccepted, status, string(body))
	var a struct {
		StreamToken string `json:"stream_token"`
	}
	require.NoError(t, json.Unmarshal(body, &a))
	streamURL := base + "/v1/sessions/revoked/events?access_token=" + url.QueryEscape(a.StreamToken)
	stream := testenv.OpenSSE(t, streamURL, "")
	require.Equal(t, http.StatusOK, stream.Resp.StatusCode)
	stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })

	require.NoError(t, apikey.Revoke(ctx, env.Pool, id))
	evs := stream.Ended(t, 15*time.Second)
	require.NotEmpty(t, evs)
	require.Equal(t, "stream.revoked", evs[len(evs)-1].Type)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a new stream with the revoked key's token")
}

// TestTenancyRoutesAnswerProblems: an unknown route and a wrong method are problem documents, and
// percent-encoded "." and ".." session IDs are refused by intake and the gateway alike.
func TestTenancyRoutesAnswerProblems(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	cfg := env.Config
	cfg.Roles = "intake,gateway"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	do := func(method, path string) (int, http.Header) {
		req, err := http.NewRequest(method, base+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode, resp.Header
	}
	for _, c := range []struct {
		name, method, path string
		status             int
	}{
		{"UnknownRoute", http.MethodGet, "/v1/nothing", http.StatusNotFound},
		{"WrongMethod", http.MethodDelete, "/v1/sessions/s1/turns", http.StatusMethodNotAllowed},
		{"EncodedDotDotStream", http.MethodGet, "/v1/sessions/%2E%2E/events", http.StatusBadRequest},
		{"EncodedDotTurns", http.MethodGet, "/v1/sessions/%2E/turns", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, header := do(c.method, c.path)
			require.Equal(t, c.status, status)
			require.Equal(t, "application/problem+json", header.Get("Content-Type"))
		})
	}
}
