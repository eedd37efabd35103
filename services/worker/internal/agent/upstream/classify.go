package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Class is what an upstream error means for the caller.
type Class int

// Classes of upstream errors.
const (
	// Terminal: retrying cannot help (a bad request, a refused input, the turn's own cancellation).
	Terminal Class = iota
	// Retryable: a transient fault (a reset connection, a 502, a stream cut short).
	Retryable
	// Overload: the upstream refuses because it is saturated (429, 503); the limit must shrink.
	Overload
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Overload:
		return "overload"
	default:
		return "terminal"
	}
}

// StatusError is an HTTP answer other than success from an upstream.
type StatusError struct {
	Upstream string
	Status   int
	// RetryAfter is the upstream's Retry-After, zero when absent.
	RetryAfter time.Duration
	// Body is the start of the answer's body, for the error message.
	Body string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s answered %d %s", e.Upstream, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Is makes terminal client errors match agent.ErrPermanent.
func (e *StatusError) Is(target error) bool {
	return target == agent.ErrPermanent && classifyStatus(e.Status) == Terminal
}

// StreamError is an error the upstream reported inside an answer it had begun (an error event in
// the stream). Overload says whether the upstream described it as capacity trouble.
type StreamError struct {
	Upstream string
	Message  string
	Overload bool
}

func (e *StreamError) Error() string {
	return e.Upstream + " reported an error mid-stream: " + e.Message
}

// NewStatusError reads an error answer: its status, Retry-After and the start of its body.
func NewStatusError(name string, resp *http.Response, now time.Time) *StatusError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return &StatusError{
		Upstream: name, Status: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now),
		Body: strings.TrimSpace(string(body)),
	}
}

// ParseRetryAfter reads a Retry-After value, in seconds or as an HTTP date; zero when absent or bad.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func classifyStatus(status int) Class {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return Overload
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return Retryable
	default:
		return Terminal
	}
}

// Classify says what an error from an upstream call means. It is the one place that decides.
func Classify(err error) Class {
	if err == nil {
		return Terminal
	}
	var se *StatusError
	if errors.As(err, &se) {
		return classifyStatus(se.Status)
	}
	var me *StreamError
	if errors.As(err, &me) {
		if me.Overload {
			return Overload
		}
		return Retryable
	}
	switch {
	case errors.Is(err, agent.ErrPermanent), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The turn's own end (cancelled, drained, out of time) is not the upstream's fault.
		return Terminal
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return Retryable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return Retryable
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Retryable
	}
	return Retryable
}

// RetryAfter returns the upstream's requested pause carried by err, zero when none.
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}
