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

// Routes mounts the page at /langgraph/ (and /langgraph) and its bundle under /langgraph/assets/.
func Routes(r chi.Router) {
	static, _ := fs.Sub(files, "static")
	page := func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		httpx.SetPageHeaders(w.Header())
		http.ServeFileFS(w, req, static, "index.html")
	}
	// The bundle names its assets by absolute path, so the page works with or without the slash.
	r.Get("/langgraph", page)
	r.Get("/langgraph/", page)
	assets := http.StripPrefix("/langgraph", http.FileServerFS(static))
	r.Get("/langgraph/assets/*", func(w http.ResponseWriter, req *http.Request) {
		// Asset names carry their content hash, so they never change under one name.
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		assets.ServeHTTP(w, req)
	})
}
