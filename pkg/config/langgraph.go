package config

import (
	"errors"
	"strings"
	"time"
)

// LangGraphAssistantsDefault is the one assistant the langgraph role serves when
// TURNSTILE_LANGGRAPH_ASSISTANTS is unset: "agent", the graph name LangGraph's templates and
// examples use, so a client written for them needs no change.
const LangGraphAssistantsDefault = "agent"

// LangGraph bounds' defaults.
const (
	LangGraphThreadsMaxDefault  = 10000
	LangGraphMetadataMaxDefault = 16 << 10
	LangGraphThreadTTLDefault   = 7 * 24 * time.Hour
)

// LangGraphSettings configure the langgraph role (LangGraph-compatible threads and runs).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type LangGraphSettings struct {
	// Assistants is the comma list of assistant IDs (graph names) LangGraph runs may name; every
	// one runs the workers' agent, and a run naming another is answered 404. Defaults to agent.
	Assistants string `env:"TURNSTILE_LANGGRAPH_ASSISTANTS"`
	// ThreadsMax is the most threads one tenant may have. POST /threads (or a run with
	// if_not_exists=create) past it is answered 409 threads-limit; the count and the insert are
	// one transaction under a per-tenant lock, so concurrent creations cannot pass it. Deleted
	// threads and those retention removed (TURNSTILE_LANGGRAPH_THREAD_TTL) no longer count.
	// Defaults to 10000.
	ThreadsMax int `env:"TURNSTILE_LANGGRAPH_THREADS_MAX"`
	// MetadataMax is the largest metadata a thread may be created with, in bytes of its JSON.
	// Larger is answered 422 validation-failed. Defaults to 16384 (16 KiB).
	MetadataMax int `env:"TURNSTILE_LANGGRAPH_METADATA_MAX"`
	// ThreadTTL is how long a thread may stay idle (no run created on it, updated_at) before the
	// workers' retention cleaner deletes it, at TURNSTILE_RETENTION_INTERVAL; a thread with a run
	// queued or running is kept. Its runs are turns, deleted by TURNSTILE_RETENTION as every
	// turn. Defaults to 168h (7 days).
	ThreadTTL time.Duration `env:"TURNSTILE_LANGGRAPH_THREAD_TTL"`
	// CORSOrigins is a comma list of origins whose pages may call the LangGraph routes from a
	// browser ("*" allows any), as a chat front end on its own origin does: every route answers
	// the preflight and names the origin on its answers, never credentials (keys travel as
	// x-api-key or Authorization: Bearer). Defaults to none: same origin only.
	CORSOrigins string `env:"TURNSTILE_LANGGRAPH_CORS_ORIGINS"`
}

func (s *LangGraphSettings) applyDefaults() {
	if strings.TrimSpace(s.Assistants) == "" {
		s.Assistants = LangGraphAssistantsDefault
	}
	if s.ThreadsMax == 0 {
		s.ThreadsMax = LangGraphThreadsMaxDefault
	}
	if s.MetadataMax == 0 {
		s.MetadataMax = LangGraphMetadataMaxDefault
	}
	if s.ThreadTTL == 0 {
		s.ThreadTTL = LangGraphThreadTTLDefault
	}
}

func (s LangGraphSettings) validate() []error {
	var errs []error
	for _, a := range s.AssistantList() {
		if len(a) > 128 || strings.ContainsAny(a, "/?#") {
			errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_ASSISTANTS: each assistant ID must be at most 128 characters without / ? #"))
			break
		}
	}
	if len(s.AssistantList()) == 0 {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_ASSISTANTS: no assistant named"))
	}
	if s.ThreadsMax < 1 {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_THREADS_MAX: must be at least 1"))
	}
	if s.MetadataMax < 2 || s.MetadataMax > 1<<20 {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_METADATA_MAX: must be between 2 and 1048576 bytes"))
	}
	if s.ThreadTTL < time.Second {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_THREAD_TTL: must be at least 1s"))
	}
	return errs
}

// CORSOriginList splits CORSOrigins.
func (s LangGraphSettings) CORSOriginList() []string { return splitList(s.CORSOrigins) }

// AssistantList splits Assistants.
func (s LangGraphSettings) AssistantList() []string { return splitList(s.Assistants) }
