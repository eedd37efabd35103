package config

import (
	"errors"
	"strings"
)

// LangGraphAssistantsDefault is the one assistant the langgraph role serves when
// TURNSTILE_LANGGRAPH_ASSISTANTS is unset: "agent", the graph name LangGraph's templates and
// examples use, so a client written for them needs no change.
const LangGraphAssistantsDefault = "agent"

// LangGraphSettings configure the langgraph role (LangGraph-compatible threads and runs).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type LangGraphSettings struct {
	// Assistants is the comma list of assistant IDs (graph names) LangGraph runs may name; every
	// one runs the workers' agent, and a run naming another is answered 404. Defaults to agent.
	Assistants string `env:"TURNSTILE_LANGGRAPH_ASSISTANTS"`
}

func (s *LangGraphSettings) applyDefaults() {
	if strings.TrimSpace(s.Assistants) == "" {
		s.Assistants = LangGraphAssistantsDefault
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
	return errs
}

// AssistantList splits Assistants.
func (s LangGraphSettings) AssistantList() []string { return splitList(s.Assistants) }
