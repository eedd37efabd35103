package sse

import "net/http"

// corsMaxAge is how long, in seconds, a browser may cache a preflight's answer.
const corsMaxAge = "600"

func (h *Handler) setCORS(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return
	}
	w.Header().Add("Vary", "Origin")
	if h.anyOK || h.cors[origin] {
		// No Allow-Credentials: streams authenticate with tokens, never cookies, so a page on an
		// allowed origin gains nothing from the browser's credentials and "*" stays harmless.
		w.Header().Set("Access-Control-Allow-Origin", origin)
	}
}

func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) {
	h.setCORS(w, r)
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Last-Event-ID, Cache-Control")
		w.Header().Set("Access-Control-Max-Age", corsMaxAge)
	}
	w.WriteHeader(http.StatusNoContent)
}
