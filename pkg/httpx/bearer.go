package httpx

import (
	"net/http"
	"strings"
)

// BearerToken returns the credential of the request's Authorization header when its scheme is
// Bearer, or "". The scheme is matched case-insensitively (RFC 9110, section 11.1), so intake and
// the gateway accept "bearer" and "BEARER" alike.
func BearerToken(r *http.Request) string {
	scheme, rest, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(rest)
}
