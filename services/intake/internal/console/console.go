package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

//go:embed dist
var files embed.FS

// Routes mounts the console at /console/ and its hashed assets under /console/assets/.
func Routes(r chi.Router) {
	dist, _ := fs.Sub(files, "dist")
	assets := http.FileServerFS(dist)
	r.Get("/console", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/console/", http.StatusMovedPermanently)
	})
	r.Get("/console/", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		httpx.SetPageHeaders(w.Header())
		http.ServeFileFS(w, req, dist, "index.html")
	})
	r.Get("/console/assets/*", func(w http.ResponseWriter, req *http.Request) {
		// Asset names carry their content hash, so they never change under a name.
		if strings.Contains(req.URL.Path, "/assets/index-") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		http.StripPrefix("/console", assets).ServeHTTP(w, req)
	})
}
