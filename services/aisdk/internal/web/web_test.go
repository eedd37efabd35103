package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPageAndAssets: /chat/ serves the built page, and every asset it names is served.
func TestPageAndAssets(t *testing.T) {
	t.Parallel()
	r := chi.NewRouter()
	Routes(r)
	get := func(path string) *http.Response {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Result()
	}
	resp := get("/chat/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assets := regexp.MustCompile(`/chat/assets/[^"]+`).FindAllString(string(body), -1)
	require.Len(t, assets, 2, "the page names its script and its stylesheet")
	for _, a := range assets {
		resp := get(a)
		require.Equal(t, http.StatusOK, resp.StatusCode, a)
		require.Contains(t, resp.Header.Get("Cache-Control"), "immutable", a)
	}
	require.Equal(t, http.StatusMovedPermanently, get("/chat").StatusCode)
}
