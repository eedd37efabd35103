package httpx

import (
	"net/http"
	"strings"
)

// CORSMaxAge is how long, in seconds, a browser may cache a preflight's answer.
const CORSMaxAge = "600"

// CORS lets pages of an allow-list of origins call a route from a browser. An allowed origin gets
// Access-Control-Allow-Origin naming it on every answer (the exposed headers too) and on the
// preflight the route's methods and request headers. Never credentials: every route authenticates
// with a bearer credential the page sends itself, never with cookies, so a page on an allowed
// origin gains nothing from the browser's own credentials and "*" stays harmless.
type CORS struct {
	any     bool
	origins map[string]bool
	// Methods and Headers answer a preflight (Access-Control-Allow-Methods and -Headers); Expose
	// is Access-Control-Expose-Headers, the response headers a page may read beyond the simple
	// ones.
	Methods, Headers, Expose string
}

// NewCORS allows origins ("*": any; none: same origin only, every cross-origin call is refused by
// the browser).
func NewCORS(origins []string, methods, headers, expose string) *CORS {
	c := &CORS{origins: map[string]bool{}, Methods: methods, Headers: headers, Expose: expose}
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.TrimRight(o, "/")] = true
	}
	return c
}

// Allow marks the answer to r as readable by r's origin when the list allows it.
func (c *CORS) Allow(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return
	}
	w.Header().Add("Vary", "Origin")
	if c.any || c.origins[origin] {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if c.Expose != "" {
			w.Header().Set("Access-Control-Expose-Headers", c.Expose)
		}
	}
}

// Preflight answers an OPTIONS request: 204, with the methods and headers for an allowed origin.
func (c *CORS) Preflight(w http.ResponseWriter, r *http.Request) {
	c.Allow(w, r)
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		w.Header().Set("Access-Control-Allow-Methods", c.Methods)
		w.Header().Set("Access-Control-Allow-Headers", c.Headers)
		w.Header().Set("Access-Control-Max-Age", CORSMaxAge)
	}
	w.Header().Set("Allow", c.Methods)
	w.WriteHeader(http.StatusNoContent)
}
