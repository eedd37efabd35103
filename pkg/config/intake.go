package config

// IntakeSettings are intake's settings beyond the shared ones (admission control, quotas, API).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type IntakeSettings struct{}

func (s *IntakeSettings) applyDefaults() {}

func (s IntakeSettings) validate() []error { return nil }
