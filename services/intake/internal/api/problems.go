package api

import (
	"net/http"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// Problem types intake answers with. They are part of the API: clients branch on them, and the
// OpenAPI document lists them.
const (
	ProblemInvalidSession   = "invalid-session-id"
	ProblemInvalidBody      = "invalid-body"
	ProblemBodyTooLarge     = "body-too-large"
	ProblemUnsupportedType  = "unsupported-media-type"
	ProblemValidation       = "validation-failed"
	ProblemInvalidDeadline  = "invalid-deadline"
	ProblemInvalidTurnID    = "invalid-turn-id"
	ProblemInvalidCursor    = "invalid-cursor"
	ProblemIdempotencyReuse = "idempotency-key-reused"
	ProblemUnauthorized     = "unauthorized"
	ProblemSessionNotFound  = "session-not-found"
	ProblemTurnNotFound     = "turn-not-found"
	ProblemSessionBusy      = "session-busy"
	ProblemRateLimited      = "rate-limited"
	ProblemQueueQuota       = "queued-turns-quota"
	ProblemBacklog          = "backlog-too-old"
	ProblemDeadlineUnreach  = "deadline-unreachable"
	ProblemKafkaUnavail     = "kafka-unavailable"
	ProblemStoreUnavail     = "store-unavailable"
)

func problem(w http.ResponseWriter, status int, typ, detail string) {
	httpx.WriteProblem(w, httpx.Problem{Type: typ, Status: status, Detail: detail})
}

func unavailable(w http.ResponseWriter, typ, detail string, retryAfter time.Duration) {
	httpx.WriteProblem(w, httpx.Problem{
		Type: typ, Status: http.StatusServiceUnavailable, Detail: detail,
		RetryAfter: httpx.Jitter(retryAfter),
	})
}

func tooMany(w http.ResponseWriter, typ, detail string, retryAfter time.Duration) {
	if retryAfter < time.Second {
		retryAfter = time.Second
	}
	httpx.WriteProblem(w, httpx.Problem{
		Type: typ, Status: http.StatusTooManyRequests, Detail: detail,
		RetryAfter: retryAfter,
	})
}
