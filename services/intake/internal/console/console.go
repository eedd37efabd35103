package console

import (
	"embed"
	"io/fs"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

//go:embed dist
var files embed.FS

// Routes mounts the console at /console/ and its hashed assets under /console/assets/.
func Routes(r chi.Router) {
	dist, _ := fs.Sub(files, "dist")
	httpx.MountBundle(r, "/console", dist)
}
