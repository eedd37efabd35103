package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPageAndAssets: /console/ serves the built page, and every asset it names is served.
func TestPageAndAssets(t *testing.T) {
	t.Parallel()
	r := chi.NewRouter()
	Routes(r)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	page := get("/console/")
	require.Equal(t, http.StatusOK, page.Code)
	assets := regexp.MustCompile(`/console/assets/[^"]+`).FindAllString(page.Body.String(), -1)
	require.Len(t, assets, 2, "the page names its script and its stylesheet")
	for _, a := range assets {
		rec := get(a)
		require.Equal(t, http.StatusOK, rec.Code, a)
		require.NotZero(t, rec.Body.Len(), a)
		require.Contains(t, rec.Header().Get("Cache-Control"), "immutable", a)
	}
	require.Equal(t, http.StatusMovedPermanently, get("/console").Code)
}
