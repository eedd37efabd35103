package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// front serves the handler's routes on a router set up as the process's is (pkg/app), with no
// store behind them: the routes tested here answer without one.
func front(t *testing.T, cfg Config) (http.Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := New(cfg, nil, nil, slog.New(slog.DiscardHandler), reg)
	r := chi.NewRouter()
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	h.Routes(r)
	return r, reg
}

func serve(h http.Handler, method, path string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestOkAndInfo(t *testing.T) {
	t.Parallel()
	h, _ := front(t, Config{Version: "v1.2.3"})

	w := serve(h, http.MethodGet, "/ok", nil)
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"ok":true}`, w.Body.String())

	w = serve(h, http.MethodGet, "/info", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var info struct {
		Version string          `json:"version"`
		Flags   map[string]bool `json:"flags"`
		Host    map[string]any  `json:"host"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &info))
	require.Equal(t, "v1.2.3", info.Version, "the binary's build version")
	require.Equal(t, map[string]bool{"assistants": true, "crons": true, "langsmith": false, "langsmith_tracing_replicas": false}, info.Flags,
		"the flags say what is not served, so clients do not call it")
	require.Equal(t, "self-hosted", info.Host["kind"])
}

func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "http://chat.example:3000"
	preflight := func(method string) http.Header {
		return http.Header{
			"Origin": {app}, "Access-Control-Request-Method": {method},
			"Access-Control-Request-Headers": {"content-type,x-api-key,x-custom-trace"},
		}
	}

	t.Run("PreflightEveryRoute", func(t *testing.T) {
		t.Parallel()
		h, _ := front(t, Config{CORSOrigins: []string{app}})
		for _, tc := range []struct{ method, path string }{
			{"GET", "/ok"},
			{"GET", "/info"},
			{"POST", "/threads"},
			{"GET", "/threads/t1"},
			{"DELETE", "/threads/t1"},
			{"POST", "/threads/t1/history"},
			{"POST", "/threads/t1/runs/stream"},
			{"GET", "/threads/t1/runs/r1/stream"},
			{"POST", "/threads/t1/runs/r1/cancel"},
			// Not served: the preflight passes, so the page reads the 404 problem that follows.
			{"POST", "/assistants/search"},
		} {
			w := serve(h, http.MethodOptions, tc.path, preflight(tc.method))
			require.Equal(t, http.StatusNoContent, w.Code, tc.path)
			require.Equal(t, app, w.Header().Get("Access-Control-Allow-Origin"), tc.path)
			require.Contains(t, w.Header().Get("Access-Control-Allow-Methods"), tc.method, tc.path)
			for _, hd := range []string{"Content-Type", "X-Api-Key", "Authorization", "Last-Event-ID"} {
				require.Contains(t, w.Header().Get("Access-Control-Allow-Headers"), hd, tc.path)
			}
			require.Empty(t, w.Header().Get("Access-Control-Allow-Credentials"), "never cookies")
		}
	})

	t.Run("AnswersExposeWhatTheSDKReads", func(t *testing.T) {
		t.Parallel()
		h, _ := front(t, Config{CORSOrigins: []string{app}})
		for _, tc := range []struct {
			method, path string
			code         int
		}{
			{"GET", "/info", http.StatusOK},
			{"GET", "/assistants/agent", http.StatusNotFound},
			{"PUT", "/threads/t1", http.StatusMethodNotAllowed},
		} {
			w := serve(h, tc.method, tc.path, http.Header{"Origin": {app}})
			require.Equal(t, tc.code, w.Code, tc.path)
			require.Equal(t, app, w.Header().Get("Access-Control-Allow-Origin"), tc.path)
			for _, hd := range []string{"Content-Location", "Location", "Retry-After", "WWW-Authenticate"} {
				require.Contains(t, w.Header().Get("Access-Control-Expose-Headers"), hd, tc.path)
			}
		}
	})

	t.Run("ClosedByDefault", func(t *testing.T) {
		t.Parallel()
		h, _ := front(t, Config{})
		w := serve(h, http.MethodOptions, "/threads/t1/runs/stream", preflight("POST"))
		require.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
		w = serve(h, http.MethodGet, "/info", http.Header{"Origin": {app}})
		require.Equal(t, http.StatusOK, w.Code)
		require.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
	})

	t.Run("OtherOriginRefused", func(t *testing.T) {
		t.Parallel()
		h, _ := front(t, Config{CORSOrigins: []string{app}})
		w := serve(h, http.MethodOptions, "/threads", http.Header{"Origin": {"http://evil.example"}, "Access-Control-Request-Method": {"POST"}})
		require.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
	})
}

// TestBodyWithoutContentType: a JSON body is read as the Platform reads it whatever it is labelled
// with when the label is missing or text/plain (a proxy such as agent-chat-ui's /api passthrough
// drops it, and fetch labels a string body text/plain); a body that is not JSON is still a 400,
// and a body declared as another type a 415.
func TestBodyWithoutContentType(t *testing.T) {
	t.Parallel()
	h := New(Config{}, nil, nil, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	for _, tc := range []struct {
		name, ctype, body string
		status            int
	}{
		{"NoContentType", "", `{"thread_id":"t1"}`, 0},
		{"TextPlain", "text/plain;charset=UTF-8", `{"thread_id":"t1"}`, 0},
		{"JSON", "application/json; charset=utf-8", `{"thread_id":"t1"}`, 0},
		{"NoContentTypeNotJSON", "", `thread_id=t1`, http.StatusBadRequest},
		{"TextPlainNotJSON", "text/plain", `hello`, http.StatusBadRequest},
		{"Form", "application/x-www-form-urlencoded", `thread_id=t1`, http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, "/threads", strings.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			var got struct {
				ThreadID string `json:"thread_id"`
			}
			p := h.decodeBody(httptest.NewRecorder(), req, &got)
			if tc.status == 0 {
				require.Nil(t, p)
				require.Equal(t, "t1", got.ThreadID)
				return
			}
			require.NotNil(t, p)
			require.Equal(t, tc.status, p.Status)
		})
	}
}

// TestUnroutedCounted: a path or method no LangGraph route serves is counted by family, method
// and status (never the raw path) and logged at debug level with its method and path, so an
// operator sees what clients want.
func TestUnroutedCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := New(Config{}, nil, nil, log, reg)
	r := chi.NewRouter()
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	h.Routes(r)

	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/assistants/agent/versions", http.StatusNotFound},
		{"POST", "/assistants/agent/versions", http.StatusNotFound},
		{"PUT", "/threads/t1", http.StatusMethodNotAllowed},
		{"GET", "/threads", http.StatusMethodNotAllowed},
		{"TRACE", "/threads/t1", http.StatusMethodNotAllowed},
		{"GET", "/threads/t1/runs/r1/nope", http.StatusNotFound},
		{"PUT", "/store/nope", http.StatusNotFound},
	} {
		w := serve(r, tc.method, tc.path, nil)
		require.Equal(t, tc.code, w.Code, tc.method+" "+tc.path)
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	}
	w := serve(r, http.MethodPut, "/threads/t1", nil)
	require.Equal(t, "GET, PATCH, DELETE", w.Header().Get("Allow"), "405 still names the methods the path serves")

	count := func(family, method, code string) float64 {
		return testutil.ToFloat64(h.unrouted.WithLabelValues(family, method, code))
	}
	require.Equal(t, 2.0, count("/assistants", "POST", "404"))
	require.Equal(t, 2.0, count("/threads", "PUT", "405"))
	require.Equal(t, 1.0, count("/threads", "GET", "405"))
	require.Equal(t, 1.0, count("/threads", "other", "405"), "an unknown method is not a label value")
	require.Equal(t, 1.0, count("/threads", "GET", "404"))
	require.Equal(t, 1.0, count("/store", "PUT", "404"))
	n, err := testutil.GatherAndCount(reg, "turnstile_langgraph_unrouted_total")
	require.NoError(t, err)
	require.Equal(t, 6, n, "one series per family, method and code, never per path")

	require.Contains(t, logs.String(), "level=DEBUG msg=\"langgraph unrouted\" method=POST path=/assistants/agent/versions code=404")
	require.Contains(t, logs.String(), "method=TRACE path=/threads/t1 code=405")
}
