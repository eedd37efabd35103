package httpx

import "net/http"

// ProblemType is one stable problem type of turnstile's API: Name is the last segment of its URI
// (what clients branch on) and Status the one HTTP status it is answered with.
type ProblemType struct {
	Name   string
	Status int
}

// URI is the type's stable identifier, as problem documents carry it.
func (t ProblemType) URI() string { return ProblemTypeBase + t.Name }

// Problem returns a problem document of this type.
func (t ProblemType) Problem(detail string) Problem {
	return Problem{Type: t.Name, Status: t.Status, Detail: detail}
}

// The catalog of problem types intake and the gateway answer with. They are part of the API: the
// OpenAPI document in pkg/openapi lists every one, and a test there keeps the two in step.
var (
	// Request shape (400, 413, 415, 422).
	ProblemInvalidSession  = ProblemType{"invalid-session-id", http.StatusBadRequest}
	ProblemInvalidBody     = ProblemType{"invalid-body", http.StatusBadRequest}
	ProblemBodyTooLarge    = ProblemType{"body-too-large", http.StatusRequestEntityTooLarge}
	ProblemUnsupportedType = ProblemType{"unsupported-media-type", http.StatusUnsupportedMediaType}
	ProblemValidation      = ProblemType{"validation-failed", http.StatusUnprocessableEntity}
	ProblemInvalidDeadline = ProblemType{"invalid-deadline", http.StatusBadRequest}
	ProblemInvalidTurnID   = ProblemType{"invalid-turn-id", http.StatusBadRequest}
	ProblemInvalidCursor   = ProblemType{"invalid-cursor", http.StatusBadRequest}
	// ProblemIdempotencyReuse is an Idempotency-Key (or turn_id) sent again with another body.
	ProblemIdempotencyReuse = ProblemType{"idempotency-key-reused", http.StatusUnprocessableEntity}

	// Credentials (401). One type for a missing or invalid API key or stream token, whichever
	// service answers; an expired stream token has its own, because its remedy differs (read the
	// turn's status for a fresh one).
	ProblemUnauthenticated = ProblemType{"unauthenticated", http.StatusUnauthorized}
	ProblemTokenExpired    = ProblemType{"stream-token-expired", http.StatusUnauthorized}

	// ProblemAdminRequired is a route only an admin's key may use (403): the agent registry's
	// writes and reads.
	ProblemAdminRequired = ProblemType{"admin-required", http.StatusForbidden}

	// Missing or foreign resources (404): another tenant's session or turn is answered the same
	// way, so a tenant cannot learn that it exists.
	ProblemSessionNotFound = ProblemType{"session-not-found", http.StatusNotFound}
	ProblemTurnNotFound    = ProblemType{"turn-not-found", http.StatusNotFound}
	// ProblemPushConfigNotFound is a push config the task does not have (or no longer has).
	ProblemPushConfigNotFound = ProblemType{"push-config-not-found", http.StatusNotFound}
	// ProblemThreadNotFound and ProblemAssistantNotFound are the LangGraph front door's: a thread
	// the tenant never created, an assistant ID no TURNSTILE_LANGGRAPH_ASSISTANTS entry names.
	ProblemThreadNotFound    = ProblemType{"thread-not-found", http.StatusNotFound}
	ProblemAssistantNotFound = ProblemType{"assistant-not-found", http.StatusNotFound}
	// ProblemScheduleNotFound is a schedule (a LangGraph cron) the tenant does not have.
	ProblemScheduleNotFound = ProblemType{"schedule-not-found", http.StatusNotFound}
	// ProblemAgentNotFound is a turn or a read naming an agent the catalog does not hold
	// (pkg/agents).
	ProblemAgentNotFound = ProblemType{"agent-not-found", http.StatusNotFound}
	// ProblemNotFound is a path no route serves.
	ProblemNotFound = ProblemType{"not-found", http.StatusNotFound}

	// ProblemMethodNotAllowed is a known path asked with another method (405, with Allow).
	ProblemMethodNotAllowed = ProblemType{"method-not-allowed", http.StatusMethodNotAllowed}
	// ProblemHeaderTooLarge is a request whose header is over MaxHeaderBytes (431).
	ProblemHeaderTooLarge = ProblemType{"header-too-large", http.StatusRequestHeaderFieldsTooLarge}

	// ProblemSessionBusy is multitask=reject while the session has a live turn (409).
	ProblemSessionBusy = ProblemType{"session-busy", http.StatusConflict}
	// ProblemThreadExists is POST /threads with the ID of an existing thread and if_exists=raise.
	ProblemThreadExists = ProblemType{"thread-exists", http.StatusConflict}
	// ProblemTurnLive is a replay of a turn that has not ended (admin API).
	ProblemTurnLive = ProblemType{"turn-live", http.StatusConflict}
	// ProblemJobExists is a bulk job whose name the caller's scope already used (admin API).
	ProblemJobExists = ProblemType{"job-exists", http.StatusConflict}
	// ProblemThreadBusy is DELETE /threads/{thread_id} while a run of the thread is queued or
	// running.
	ProblemThreadBusy = ProblemType{"thread-busy", http.StatusConflict}
	// ProblemPushConfigsLimit is a new push config for a task that has TURNSTILE_PUSH_CONFIGS_MAX.
	ProblemPushConfigsLimit = ProblemType{"push-configs-limit", http.StatusConflict}
	// ProblemThreadsLimit is POST /threads by a tenant that has TURNSTILE_LANGGRAPH_THREADS_MAX.
	ProblemThreadsLimit = ProblemType{"threads-limit", http.StatusConflict}
	// ProblemSchedulesLimit is a new schedule of a tenant that has TURNSTILE_SCHEDULES_MAX.
	ProblemSchedulesLimit = ProblemType{"schedules-limit", http.StatusConflict}
	// ProblemStoreItemsLimit is a new LangGraph store item of a tenant that has
	// TURNSTILE_LANGGRAPH_STORE_ITEMS_MAX.
	ProblemStoreItemsLimit = ProblemType{"store-items-limit", http.StatusConflict}
	// ProblemStaleCheckpoint is a LangGraph run or state update from a checkpoint that is not its
	// thread's latest: a thread continues from its latest state only.
	ProblemStaleCheckpoint = ProblemType{"stale-checkpoint", http.StatusConflict}

	// ProblemInstanceTaken is an agent registration of an instance ID that a live registration of
	// another endpoint holds (409).
	ProblemInstanceTaken = ProblemType{"instance-taken", http.StatusConflict}
	// ProblemStaleEpoch is a renewal or removal of an agent registration that is gone or holds a
	// newer epoch (412): the replica registers again.
	ProblemStaleEpoch = ProblemType{"stale-epoch", http.StatusPreconditionFailed}
	// ProblemEpochRequired is a renewal or removal of an agent registration without its epoch in
	// If-Match (428).
	ProblemEpochRequired = ProblemType{"epoch-required", http.StatusPreconditionRequired}

	// ProblemMisdirected is an ID of another region sent to this one directly (421); the "region"
	// member names the owner, where the request should have gone (see pkg/region).
	ProblemMisdirected = ProblemType{"misdirected", http.StatusMisdirectedRequest}

	// Quotas (429, with Retry-After).
	ProblemRateLimited = ProblemType{"rate-limited", http.StatusTooManyRequests}
	ProblemQueueQuota  = ProblemType{"queued-turns-quota", http.StatusTooManyRequests}
	// ProblemBudgetExhausted refuses a turn of a tenant that spent its token budget of the period
	// (pkg/quota); Retry-After is the period's reset.
	ProblemBudgetExhausted = ProblemType{"budget-exhausted", http.StatusTooManyRequests}
	// ProblemTenantStreamShare refuses a long-lived stream of a tenant that holds its share of a
	// replica's open streams (pkg/admission).
	ProblemTenantStreamShare = ProblemType{"tenant-stream-share", http.StatusTooManyRequests}

	// Capacity and dependencies (503, with a jittered Retry-After).
	ProblemBacklog         = ProblemType{"backlog-too-old", http.StatusServiceUnavailable}
	ProblemDeadlineUnreach = ProblemType{"deadline-unreachable", http.StatusServiceUnavailable}
	ProblemKafkaUnavail    = ProblemType{"kafka-unavailable", http.StatusServiceUnavailable}
	ProblemStoreUnavail    = ProblemType{"store-unavailable", http.StatusServiceUnavailable}
	// ProblemOverCapacity refuses a long-lived stream of a replica, or a session, that holds as
	// many open streams as its cap allows (pkg/admission).
	ProblemOverCapacity = ProblemType{"over-capacity", http.StatusServiceUnavailable}
	// ProblemRegionUnavailable is the router's answer when the region owning a request cannot be
	// reached; the "region" member names it. Never "not found": the work still exists there.
	ProblemRegionUnavailable = ProblemType{"region-unavailable", http.StatusServiceUnavailable}
)

// ProblemTypes is the whole catalog, in the order above.
func ProblemTypes() []ProblemType {
	return []ProblemType{
		ProblemInvalidSession, ProblemInvalidBody, ProblemBodyTooLarge, ProblemUnsupportedType,
		ProblemValidation, ProblemInvalidDeadline, ProblemInvalidTurnID, ProblemInvalidCursor,
		ProblemIdempotencyReuse, ProblemUnauthenticated, ProblemTokenExpired, ProblemAdminRequired, ProblemSessionNotFound,
		ProblemTurnNotFound, ProblemPushConfigNotFound, ProblemThreadNotFound, ProblemAssistantNotFound, ProblemScheduleNotFound, ProblemAgentNotFound, ProblemNotFound, ProblemMethodNotAllowed,
		ProblemHeaderTooLarge, ProblemSessionBusy, ProblemThreadExists, ProblemTurnLive, ProblemJobExists, ProblemThreadBusy, ProblemPushConfigsLimit, ProblemThreadsLimit, ProblemSchedulesLimit, ProblemStoreItemsLimit, ProblemStaleCheckpoint, ProblemInstanceTaken, ProblemStaleEpoch, ProblemEpochRequired, ProblemMisdirected, ProblemRateLimited, ProblemQueueQuota, ProblemBudgetExhausted,
		ProblemTenantStreamShare, ProblemBacklog, ProblemDeadlineUnreach, ProblemKafkaUnavail, ProblemStoreUnavail,
		ProblemOverCapacity, ProblemRegionUnavailable,
	}
}
