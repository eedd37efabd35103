package httpx

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// NotFound answers a path no route serves, as problem+json like every other error.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteProblem(w, ProblemNotFound.Problem("no route serves "+r.URL.Path))
}

// allowCandidates are the methods MethodNotAllowed probes the router with to fill Allow.
var allowCandidates = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions,
}

// MethodNotAllowed answers a known path asked with a method no route serves, as problem+json with
// the Allow header RFC 9110 requires (the router is asked which methods match the path).
func MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.Routes != nil {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		for _, m := range allowCandidates {
			if rc.Routes.Match(chi.NewRouteContext(), m, path) {
				allowed = append(allowed, m)
			}
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
	}
	WriteProblem(w, ProblemMethodNotAllowed.Problem(r.Method+" is not allowed on "+r.URL.Path))
}
