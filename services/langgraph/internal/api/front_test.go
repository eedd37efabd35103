package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
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
	h, _ := front(t, Config{})

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
	require.NotEmpty(t, info.Version)
	require.Equal(t, map[string]bool{"assistants": false, "crons": false, "langsmith": false, "langsmith_tracing_replicas": false}, info.Flags,
		"the flags say what is not served, so clients do not call it")
	require.Equal(t, "self-hosted", info.Host["kind"])
}
