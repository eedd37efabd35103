package frontdoor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// UnavailableType is the Problem type of a call the native API did not answer (a refused
// connection, a timeout): the front door answers its client 503 with RetryAfter.
const UnavailableType = "upstream-unavailable"

// unavailableRetry is the Retry-After a front door sends when the native API did not answer.
const unavailableRetry = 2 * time.Second

// Problem is the native API's non-2xx answer, or a call it did not answer (UnavailableType).
type Problem struct {
	// Status is the HTTP status the native API answered (503 when it did not answer).
	Status int
	// Type is the last path segment of the native problem type URI, e.g. "session-busy",
	// "turn-not-found", "backlog-too-old"; httpx's catalog names them.
	Type   string
	Title  string
	Detail string
	// RetryAfter is the native Retry-After, zero when there was none.
	RetryAfter time.Duration
	// Body is the native problem+json body, relayed as is by Write.
	Body []byte
	// Challenge is the native 401's WWW-Authenticate challenge, relayed by Write.
	Challenge string
}

func (p *Problem) Error() string {
	if p.Detail != "" {
		return fmt.Sprintf("native api: %d %s: %s", p.Status, p.Type, p.Detail)
	}
	return fmt.Sprintf("native api: %d %s", p.Status, p.Type)
}

// Of reports whether the problem is of type t (httpx.ProblemType), so callers can branch with
// p.Of(httpx.ProblemSessionBusy).
func (p *Problem) Of(t httpx.ProblemType) bool { return p.Type == t.Name }

// Write relays the native answer to w: status, Retry-After, the WWW-Authenticate challenge of a
// 401 (httpx.BearerChallenge when the native answer had none) and the problem+json body.
func (p *Problem) Write(w http.ResponseWriter) {
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((p.RetryAfter+time.Second-1)/time.Second)))
	}
	if p.Challenge != "" && p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", p.Challenge)
	}
	httpx.Challenge(w, p.Status)
	if len(p.Body) == 0 {
		httpx.WriteProblem(w, httpx.Problem{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail})
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.Body)
}

// unavailable is the Problem of a call that got no answer.
func unavailable(what string, err error) *Problem {
	return &Problem{
		Status: http.StatusServiceUnavailable, Type: UnavailableType, Title: "Service Unavailable",
		Detail: what + ": " + err.Error(), RetryAfter: unavailableRetry,
	}
}

// problemFrom reads a non-2xx answer. A body that is not a problem document (a proxy's HTML page)
// still gives a Problem with the status.
func problemFrom(resp *http.Response, body []byte) *Problem {
	p := &Problem{Status: resp.StatusCode, Body: body, Challenge: resp.Header.Get("WWW-Authenticate")}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			p.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	var doc struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &doc) == nil && doc.Type != "" {
		p.Type = doc.Type[strings.LastIndexByte(doc.Type, '/')+1:]
		p.Title, p.Detail = doc.Title, doc.Detail
	} else {
		p.Body = nil
		p.Type = "about:blank"
		p.Title = http.StatusText(resp.StatusCode)
	}
	return p
}
