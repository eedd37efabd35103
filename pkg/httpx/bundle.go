package httpx

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// MountBundle serves a Vite build at prefix+"/": dist holds its index.html and its assets/. The
// page is served with SetPageHeaders and no-cache, prefix without the slash redirects to it, and
// the hashed bundle (assets/index-…) is cached for good: its names change with its content.
func MountBundle(r chi.Router, prefix string, dist fs.FS) {
	assets := http.StripPrefix(prefix, http.FileServerFS(dist))
	r.Get(prefix, func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, prefix+"/", http.StatusMovedPermanently)
	})
	r.Get(prefix+"/", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		SetPageHeaders(w.Header())
		http.ServeFileFS(w, req, dist, "index.html")
	})
	r.Get(prefix+"/assets/*", func(w http.ResponseWriter, req *http.Request) {
		// Asset names carry their content hash, so they never change under a name.
		if strings.Contains(req.URL.Path, "/assets/index-") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		assets.ServeHTTP(w, req)
	})
}
