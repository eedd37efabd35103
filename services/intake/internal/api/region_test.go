package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
)

// regionMap is two regions; the handler under test is euw1.
const regionMap = `{"regions":[{"code":"euw1","url":"http://127.0.0.1:1"},{"code":"use1","url":"http://127.0.0.1:2"}]}`

func setupRegion(t *testing.T, auth bool) *bundle {
	t.Helper()
	m, err := region.Parse([]byte(regionMap))
	require.NoError(t, err)
	return setup(t, options{cfg: func(c *Config) {
		c.Region = region.Local{Code: "euw1", Map: m}
		c.AuthEnabled = auth
	}})
}

// prefixedUUID checks that id is "euw1-<uuid>" and returns the UUID.
func prefixedUUID(t *testing.T, id string) uuid.UUID {
	t.Helper()
	code, u, err := region.ParseUUID(id)
	require.NoError(t, err, id)
	require.Equal(t, "euw1", code, id)
	return u
}

// TestRegionPostSession: POST /v1/sessions mints "<region>-<uuidv7>", or a bare UUIDv7 in
// single-region mode, and the minted session takes turns.
func TestRegionPostSession(t *testing.T) {
	t.Parallel()
	t.Run("Prefixed", func(t *testing.T) {
		t.Parallel()
		b := setupRegion(t, false)
		resp := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/sessions"})
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
		var s NewSession
		resp.JSON(t, &s)
		require.Equal(t, uuid.Version(7), prefixedUUID(t, s.SessionID).Version())
		require.Equal(t, "/v1/sessions/"+s.SessionID+"/turns", resp.Header.Get("Location"))
		other := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/sessions"})
		var s2 NewSession
		other.JSON(t, &s2)
		require.NotEqual(t, s.SessionID, s2.SessionID)

		accepted := postTurnAdmitted(t, b, s.SessionID)
		require.Equal(t, http.StatusAccepted, accepted.Status, string(accepted.Body))
	})
	t.Run("SingleRegion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		resp := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/sessions"})
		require.Equal(t, http.StatusCreated, resp.Status)
		var s NewSession
		resp.JSON(t, &s)
		u, err := uuid.Parse(s.SessionID)
		require.NoError(t, err)
		require.Equal(t, u.String(), s.SessionID)
	})
}

// TestRegionTurnIDs: with a region, a turn's ID carries the prefix in the 202, Location, the stream
// URL, get, list and cancel, while Kafka and Postgres keep the bare UUID and the envelope names
// the region; both forms of the ID reach the turn.
func TestRegionTurnIDs(t *testing.T) {
	t.Parallel()
	b := setupRegion(t, false)
	resp := postTurnAdmitted(t, b, "s1")
	require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
	var a Accepted
	resp.JSON(t, &a)
	bare := prefixedUUID(t, a.TurnID)
	require.Equal(t, "/v1/turns/"+a.TurnID, resp.Header.Get("Location"))
	require.Equal(t, "/v1/sessions/s1/events?turn_id="+a.TurnID, a.StreamURL)

	recs := b.turnRecords(t, 1)
	env := decodeEnvelope(t, recs[0].Value)
	require.Equal(t, bare, env.TurnID, "Kafka keeps the bare UUID")
	require.Equal(t, "euw1", env.Region)
	require.Equal(t, a.TurnID, env.ShownTurnID(), "the worker's events show the prefixed ID")

	for _, id := range []string{a.TurnID, bare.String()} {
		got := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/turns/" + id})
		require.Equal(t, http.StatusOK, got.Status, string(got.Body))
		var view map[string]any
		got.JSON(t, &view)
		require.Equal(t, a.TurnID, view["turn_id"])
	}
	list := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/s1/turns"})
	require.Equal(t, http.StatusOK, list.Status)
	var page struct {
		Turns []map[string]any `json:"turns"`
	}
	list.JSON(t, &page)
	require.Len(t, page.Turns, 1)
	require.Equal(t, a.TurnID, page.Turns[0]["turn_id"])

	cancel := do(t, b.srv.URL, request{Method: http.MethodPost, Path: "/v1/turns/" + a.TurnID + "/cancel"})
	require.Equal(t, http.StatusAccepted, cancel.Status, string(cancel.Body))
	var c CancelAccepted
	cancel.JSON(t, &c)
	require.Equal(t, a.TurnID, c.TurnID)
	require.Equal(t, "cancelled", c.Status)

	t.Run("ClientMinted", func(t *testing.T) {
		mine := uuid.Must(uuid.NewV7())
		first := postTurnAdmitted(t, b, "s2")
		require.Equal(t, http.StatusAccepted, first.Status)
		resp := postTurn(t, b.srv.URL, "s2", `{"input":{"text":"hi"},"turn_id":"euw1-`+mine.String()+`"}`, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		var a Accepted
		resp.JSON(t, &a)
		require.Equal(t, "euw1-"+mine.String(), a.TurnID)
		got := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/turns/" + mine.String()})
		require.Equal(t, http.StatusOK, got.Status, "the bare form names the same turn")
		var view map[string]any
		got.JSON(t, &view)
		require.Equal(t, a.TurnID, view["turn_id"])
		bad := postTurn(t, b.srv.URL, "s2", `{"input":{"text":"hi"},"turn_id":"apse2-`+mine.String()+`"}`, nil)
		require.Equal(t, http.StatusBadRequest, bad.Status)
		require.Contains(t, string(bad.Body), `euw1-\u003cuuid`)
	})
}

// TestRegionMisdirected: another region's IDs are answered 421 naming it, before the API key is
// checked and before anything is queued; a client's own session names that merely look prefixed
// are ordinary sessions.
func TestRegionMisdirected(t *testing.T) {
	t.Parallel()
	b := setupRegion(t, true)
	other := "use1-" + uuid.Must(uuid.NewV7()).String()
	cases := map[string]request{
		"GetTurn":     {Method: http.MethodGet, Path: "/v1/turns/" + other},
		"CancelTurn":  {Method: http.MethodPost, Path: "/v1/turns/" + other + "/cancel"},
		"Notes":       {Method: http.MethodGet, Path: "/v1/turns/" + other + "/notifications"},
		"UnknownTurn": {Method: http.MethodGet, Path: "/v1/turns/apse2-" + uuid.Must(uuid.NewV7()).String()},
		"PostTurn":    {Method: http.MethodPost, Path: "/v1/sessions/use1-chat-1/turns", Body: turnBody},
		"ListTurns":   {Method: http.MethodGet, Path: "/v1/sessions/use1-chat-1/turns"},
		"StreamToken": {Method: http.MethodPost, Path: "/v1/sessions/" + other + "/stream-token"},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			resp := do(t, b.srv.URL, req)
			require.Equal(t, http.StatusMisdirectedRequest, resp.Status, string(resp.Body))
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			var p map[string]any
			require.NoError(t, json.Unmarshal(resp.Body, &p))
			require.Equal(t, httpx.ProblemMisdirected.URI(), p["type"])
			want := "use1"
			if name == "UnknownTurn" {
				want = "apse2"
			}
			require.Equal(t, want, p["region"])
		})
	}
	require.Zero(t, b.recordsInKafka(t), "nothing was queued")

	t.Run("LookAlikeSessionsAreOrdinary", func(t *testing.T) {
		for _, s := range []string{"user-42", "euw1-chat", "apse2-chat"} {
			resp := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/sessions/" + s + "/turns"})
			require.Equal(t, http.StatusUnauthorized, resp.Status, "%s reaches authentication: %s", s, resp.Body)
		}
		require.False(t, strings.HasPrefix(other, "euw1"))
	})
}
