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

	"github.com/turnstile-run/turnstile/pkg/wire"
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
	// Unavailable: the upstream could not be reached (see Unreachable), or a proxy in front of it
	// says it is down or did not answer (502, 504). Nothing reached the agent, or nothing came
	// back: the call waits for it within the turn's deadline, like an overload, but the limit stays.
	Unavailable
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Overload:
		return "overload"
	case Unavailable:
		return "unavailable"
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

// StreamError is an error the upstream reported inside an answer it had begun (an error object or
// event in a stream whose status was 200). An upstream that names an HTTP status for it (a numeric
// code, or a type or code that stands for one) has it classified like an answer of that status: an
// in-stream 401 is as permanent as a 401, an in-stream 429 as much an overload signal as a 429.
type StreamError struct {
	Upstream string
	Message  string
	// Status is the HTTP status the error stands for, 0 when the upstream named none.
	Status int
	// Code is the upstream's own name for the error (its code or type), for the message.
	Code string
	// Overload says whether the upstream described it as capacity trouble; it decides only when
	// Status is 0.
	Overload bool
	// RetryAfter is the pause the upstream asked for, zero when it asked for none.
	RetryAfter time.Duration
}

func (e *StreamError) Error() string {
	msg := e.Upstream + " reported an error mid-stream"
	if e.Status != 0 {
		msg += ": " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	return msg + ": " + e.Message
}

// Is makes errors that stand for terminal client errors match agent.ErrPermanent.
func (e *StreamError) Is(target error) bool {
	return target == agent.ErrPermanent && e.Status != 0 && classifyStatus(e.Status) == Terminal
}

// RetryHint reads the pause an upstream asks for in the text of an error, as OpenAI-compatible APIs
// write it ("Please try again in 2.512s.", "try again in 20ms"); zero when there is none.
func RetryHint(msg string) time.Duration {
	const phrase = "try again in "
	i := strings.Index(strings.ToLower(msg), phrase)
	if i < 0 {
		return 0
	}
	rest := msg[i+len(phrase):]
	end := strings.IndexFunc(rest, func(r rune) bool {
		return (r < '0' || r > '9') && r != '.' && r != 'h' && r != 'm' && r != 's' && r != 'u' && r != 'µ' && r != 'n'
	})
	if end >= 0 {
		rest = rest[:end]
	}
	rest = strings.TrimSuffix(rest, ".")
	d, err := time.ParseDuration(rest)
	if err != nil || d <= 0 {
		return 0
	}
	return d
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
	case status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return Unavailable
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
	var gu *GaveUpError
	if errors.As(err, &gu) {
		// Its retries are spent: a caller that retried it would multiply them.
		return Terminal
	}
	var se *StatusError
	if errors.As(err, &se) {
		return classifyStatus(se.Status)
	}
	var me *StreamError
	if errors.As(err, &me) {
		if me.Status != 0 {
			return classifyStatus(me.Status)
		}
		if me.Overload {
			return Overload
		}
		return Retryable
	}
	switch {
	case errors.Is(err, agent.ErrPermanent), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The turn's own end (cancelled, drained, out of time) is not the upstream's fault.
		return Terminal
	case Unreachable(err):
		return Unavailable
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
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

// Unreachable says whether err means a request never reached the upstream: the connection was
// refused, had no route, or its dial failed otherwise (a name that did not resolve, a connect
// timeout). A retry, there or elsewhere, repeats nothing the upstream saw.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// waitReason names what a retry of err waits for (wire's Wait* reasons).
func waitReason(err error, class Class) string {
	switch class {
	case Unavailable:
		return wire.WaitUpstreamUnavailable
	case Overload:
	default:
		return wire.WaitRetryPause
	}
	var se *StatusError
	var me *StreamError
	if errors.As(err, &se) && se.Status == http.StatusTooManyRequests || errors.As(err, &me) && me.Status == http.StatusTooManyRequests {
		return wire.WaitRateLimited
	}
	return wire.WaitOverloaded
}

// RetryAfter returns the upstream's requested pause carried by err, zero when none.
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	var me *StreamError
	if errors.As(err, &me) {
		return me.RetryAfter
	}
	return 0
}
