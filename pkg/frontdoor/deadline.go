package frontdoor

import (
	"strconv"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// DeadlineHeader carries a turn's absolute deadline in Unix milliseconds: what intake reads, what
// every front door passes on from its caller, and what the worker's adapters send upstream.
const DeadlineHeader = "X-Deadline-Epoch-Ms"

// ParseDeadline reads a caller's DeadlineHeader value as intake does; "" is no deadline (intake's
// default applies). A malformed value is a *Problem of type invalid-deadline, as intake would
// answer it, so each front door refuses it in its protocol's words before anything is queued.
// Whether enough time is left is intake's to judge: it refuses a turn whose deadline leaves less
// than the minimum useful time, and the front door relays that refusal.
func ParseDeadline(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		t := httpx.ProblemInvalidDeadline
		return time.Time{}, &Problem{
			Status: t.Status, Type: t.Name, Title: "invalid deadline",
			Detail: DeadlineHeader + " must be a positive integer of milliseconds since the epoch",
		}
	}
	return time.UnixMilli(ms), nil
}
