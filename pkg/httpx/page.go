package httpx

import "net/http"

// PageCSP is the Content-Security-Policy of the pages turnstile serves (the demo chat, the AI SDK
// and LangGraph pages): scripts, styles and connections from the page's own origin only, no
// plugins, no <base> rewrite, and no framing by any other page (clickjacking).
const PageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// SetPageHeaders sets the security headers every HTML page carries: PageCSP, the older
// X-Frame-Options for browsers without frame-ancestors, no MIME sniffing and no referrer to other
// origins (a page's address holds its session ID).
func SetPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", PageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}
