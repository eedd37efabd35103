package region

import (
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// JSON-RPC error codes of the A2A routes, in the implementation-defined server range
// (-32000..-32099) that A2A itself does not use. Their data carries {"region": "<code>"}.
const (
	// RPCRegionUnavailable: the owning region cannot be reached (the router's 503).
	RPCRegionUnavailable = -32050
	// RPCMisdirected: an ID of another region sent to this one directly (a region's 421).
	RPCMisdirected = -32051
)

// MemberRegion is the problem member (and JSON-RPC data member) naming the owning region.
const MemberRegion = "region"

// Misdirected is the 421 problem for an ID of region owner sent to another region.
func Misdirected(owner string) httpx.Problem {
	p := httpx.ProblemMisdirected.Problem("this ID belongs to region " + owner + "; send the request there or through the router")
	p.Extra = map[string]any{MemberRegion: owner}
	return p
}

// Unavailable is the 503 problem for a request whose owning region cannot be reached; retryAfter
// becomes Retry-After.
func Unavailable(owner string, retryAfter time.Duration) httpx.Problem {
	p := httpx.ProblemRegionUnavailable.Problem("region " + owner + " owns this request and cannot be reached; retry later")
	p.Extra = map[string]any{MemberRegion: owner}
	p.RetryAfter = retryAfter
	return p
}
