package config

// WorkerSettings are the worker's settings beyond the shared ones.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type WorkerSettings struct{}

func (s *WorkerSettings) applyDefaults() {}

func (s WorkerSettings) validate() []error { return nil }
