package config

// GatewaySettings are the gateway's settings beyond the shared ones (CORS, caps, drain).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type GatewaySettings struct{}

func (s *GatewaySettings) applyDefaults() {}

func (s GatewaySettings) validate() []error { return nil }
