package web

import (
	"embed"
	"io/fs"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

//go:embed dist
var files embed.FS

// Routes mounts the page at /chat/ and its hashed assets under /chat/assets/.
func Routes(r chi.Router) {
	dist, _ := fs.Sub(files, "dist")
	httpx.MountBundle(r, "/chat", dist)
}
