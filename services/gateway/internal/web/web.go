package web

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

//go:embed static
var files embed.FS

// Routes mounts the page at "/" and its assets under "/static/".
func Routes(r chi.Router) {
	static, _ := fs.Sub(files, "static")
	fileServer := http.FileServerFS(static)
	r.Get("/", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		httpx.SetPageHeaders(w.Header())
		http.ServeFileFS(w, req, static, "index.html")
	})
	r.Get("/static/*", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.StripPrefix("/static", fileServer).ServeHTTP(w, req)
	})
}
