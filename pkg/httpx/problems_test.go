package httpx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProblemTypes(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, pt := range httpx.ProblemTypes() {
		require.False(t, seen[pt.Name], "%s is in the catalog twice", pt.Name)
		seen[pt.Name] = true
		require.Regexp(t, `^[a-z0-9]+(-[a-z0-9]+)*$`, pt.Name)
		require.GreaterOrEqual(t, pt.Status, 400, pt.Name)
		require.Equal(t, httpx.ProblemTypeBase+pt.Name, pt.URI())
	}
	require.False(t, seen["unauthorized"], "401 has one type, unauthenticated")
}

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	p := httpx.ProblemBacklog.Problem("too old")
	p.RetryAfter = 1500 * time.Millisecond
	httpx.WriteProblem(rec, p)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Equal(t, "2", rec.Header().Get("Retry-After"), "rounded up to whole seconds")
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, map[string]any{
		"type": httpx.ProblemBacklog.URI(), "title": "Service Unavailable", "status": 503.0, "detail": "too old",
	}, body)
}

func TestSessionID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, id string
		ok       bool
	}{
		{"Simple", "s1", true},
		{"AllClasses", "aZ09._:-", true},
		{"Longest", strings.Repeat("x", 128), true},
		{"Empty", "", false},
		{"TooLong", strings.Repeat("x", 128) + "x", false},
		{"Space", "a b", false},
		{"Slash", "a/b", false},
		{"NonASCII", "é", false},
		{"Dot", ".", false},
		{"DotDot", "..", false},
		{"DotsInside", "a..b", true},
		{"ThreeDots", "...", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			rc := chi.NewRouteContext()
			rc.URLParams.Add(httpx.SessionIDParam, tc.id)
			r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))
			id, p := httpx.SessionID(r)
			require.Equal(t, tc.id, id)
			if tc.ok {
				require.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			require.Equal(t, httpx.ProblemInvalidSession.Name, p.Type)
			require.Equal(t, http.StatusBadRequest, p.Status)
			if strings.Trim(tc.id, ".") == "" && tc.id != "" {
				require.Equal(t, `session_id must not be "." or ".."`, p.Detail)
				return
			}
			require.Equal(t, "session_id must be 1-128 characters of [A-Za-z0-9._:-]", p.Detail)
		})
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, header, want string }{
		{"Canonical", "Bearer abc", "abc"},
		{"Lower", "bearer abc", "abc"},
		{"Upper", "BEARER abc", "abc"},
		{"ExtraSpace", "Bearer   abc ", "abc"},
		{"OtherScheme", "Basic abc", ""},
		{"NoCredential", "Bearer", ""},
		{"Absent", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			require.Equal(t, tc.want, httpx.BearerToken(r))
		})
	}
}

// TestFallbacksAreProblems: an unknown route, a wrong method (with Allow) and an oversized header
// are answered as problem+json like every other error.
func TestFallbacksAreProblems(t *testing.T) {
	t.Parallel()
	r := chi.NewRouter()
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	r.Get("/v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	r.Post("/v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpx.NewServer("", r)
	srv.Start()
	t.Cleanup(srv.Close)

	problem := func(t *testing.T, req *http.Request, status int, typ string) http.Header {
		t.Helper()
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, status, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		var p struct{ Type string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		require.Equal(t, httpx.ProblemTypeBase+typ, p.Type)
		return resp.Header
	}
	t.Run("H2CPriorKnowledge", func(t *testing.T) {
		t.Parallel()
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &protocols}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/things/x", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		require.Equal(t, 2, resp.ProtoMajor, "HTTP/2 cleartext beside HTTP/1.1 on the same port")
	})
	t.Run("UnknownRoute", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/nothing", nil)
		problem(t, req, http.StatusNotFound, httpx.ProblemNotFound.Name)
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/things/x", nil)
		h := problem(t, req, http.StatusMethodNotAllowed, httpx.ProblemMethodNotAllowed.Name)
		require.Equal(t, "GET, POST", h.Get("Allow"))
	})
	t.Run("HeaderTooLarge", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/things/x", nil)
		req.Header.Set("X-Big", strings.Repeat("a", httpx.MaxHeaderBytes))
		problem(t, req, http.StatusRequestHeaderFieldsTooLarge, httpx.ProblemHeaderTooLarge.Name)
	})
	t.Run("HeaderWithinLimit", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/things/x", nil)
		req.Header.Set("X-Big", strings.Repeat("a", httpx.MaxHeaderBytes-1024))
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	})
}

// TestWriteProblemChallenges: every 401 goes out with a Bearer challenge, one the caller set is
// kept, and no other status gets one.
func TestWriteProblemChallenges(t *testing.T) {
	t.Parallel()
	for _, pt := range []httpx.ProblemType{httpx.ProblemUnauthenticated, httpx.ProblemTokenExpired} {
		rec := httptest.NewRecorder()
		httpx.WriteProblem(rec, pt.Problem("who"))
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Equal(t, httpx.BearerChallenge, rec.Header().Get("WWW-Authenticate"), pt.Name)
	}
	rec := httptest.NewRecorder()
	rec.Header().Set("WWW-Authenticate", httpx.InvalidTokenChallenge)
	httpx.WriteProblem(rec, httpx.ProblemUnauthenticated.Problem("bad key"))
	require.Equal(t, []string{httpx.InvalidTokenChallenge}, rec.Header().Values("WWW-Authenticate"))
	rec = httptest.NewRecorder()
	httpx.WriteProblem(rec, httpx.ProblemTurnNotFound.Problem("no"))
	require.Empty(t, rec.Header().Get("WWW-Authenticate"))
}
