package tasks

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// ErrVersionNotSupported is A2A's VersionNotSupportedError (-32009), which the SDK of protocol 0.3
// does not name. Package rpc answers it as a JSON-RPC error of that code.
var ErrVersionNotSupported = errors.New("version not supported")

// VersionNotSupportedCode is the JSON-RPC code of ErrVersionNotSupported.
const VersionNotSupportedCode = -32009

// outcomes name each A2A error for the requests metric.
var outcomes = []struct {
	err  error
	name string
}{
	{a2a.ErrParseError, "parse_error"},
	{a2a.ErrInvalidRequest, "invalid_request"},
	{a2a.ErrMethodNotFound, "method_not_found"},
	{a2a.ErrInvalidParams, "invalid_params"},
	{a2a.ErrTaskNotFound, "task_not_found"},
	{a2a.ErrTaskNotCancelable, "task_not_cancelable"},
	{a2a.ErrUnsupportedOperation, "unsupported_operation"},
	{a2a.ErrUnsupportedContentType, "content_type_not_supported"},
	{ErrVersionNotSupported, "version_not_supported"},
	{errUnavailable, "unavailable"},
	{a2a.ErrServerError, "server_error"},
}

// Outcome names err for the requests metric: "ok" for nil, else its A2A error's name, "internal"
// for anything else.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return "internal"
}

// errUnavailable wraps refusals the caller should retry (the native API's 429/503, a transport
// failure); it is A2A's server error (-32000) on the wire, with an HTTP 429/503 when nothing was
// written yet.
var errUnavailable = fmt.Errorf("unavailable, retry later: %w", a2a.ErrServerError)

// fail records err as the call's outcome and returns it.
func (c *Call) fail(err error) error {
	c.SetOutcome(Outcome(err))
	return err
}

// native turns an error of the native API into the A2A error the client gets. notFound is the
// error a 404 means (task not found, mostly).
func (c *Call) native(err error, notFound error) error {
	var p *frontdoor.Problem
	if !errors.As(err, &p) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return c.fail(fmt.Errorf("%w: %w", errUnavailable, err))
		}
		return c.fail(fmt.Errorf("%w: %w", a2a.ErrInternalError, err))
	}
	switch {
	case p.Status == http.StatusNotFound:
		return c.fail(notFound)
	case p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden:
		c.refuse(p.Status, 0)
		return c.fail(fmt.Errorf("%s: %w", detail(p), a2a.ErrServerError))
	case p.Status == http.StatusTooManyRequests || p.Status >= 500:
		c.refuse(refusalStatus(p.Status), p.RetryAfter)
		return c.fail(fmt.Errorf("%s: %w", detail(p), errUnavailable))
	case p.Type == httpx.ProblemPushConfigsLimit.Name:
		// The task has all the configs it may have: the params ask for one more (JSON-RPC's
		// -32602); protocol 0.3 has no error of its own for a bound.
		return c.fail(fmt.Errorf("%s: %w", detail(p), a2a.ErrInvalidParams))
	case p.Status == http.StatusConflict:
		return c.fail(fmt.Errorf("%s: %w", detail(p), a2a.ErrUnsupportedOperation))
	case p.Status >= 400 && p.Status < 500:
		return c.fail(fmt.Errorf("%s: %w", detail(p), a2a.ErrInvalidParams))
	}
	return c.fail(fmt.Errorf("%s: %w", detail(p), a2a.ErrInternalError))
}

// refusalStatus is what an overloaded or failing native answer becomes: 429 stays 429, every 5xx
// is 503 (the front door itself is fine; what it needs is not, for now).
func refusalStatus(status int) int {
	if status == http.StatusTooManyRequests {
		return status
	}
	return http.StatusServiceUnavailable
}

func detail(p *frontdoor.Problem) string {
	if p.Detail != "" {
		return p.Detail
	}
	if p.Title != "" {
		return p.Title
	}
	return http.StatusText(p.Status)
}
