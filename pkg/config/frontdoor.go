package config

import (
	"errors"
	"net/url"
)

// FrontDoorSettings say where the protocol front doors (the a2a, langgraph and aisdk roles) find the
// native API they translate to (pkg/frontdoor). Both default to the process's own HTTP listener,
// which is right when the front door runs in one process with intake and the gateway.
type FrontDoorSettings struct {
	// IntakeURL is the base URL of intake's native API; set it when a front door runs apart from
	// intake. Defaults to this process (http:// and TURNSTILE_HTTP_ADDR).
	IntakeURL string `env:"TURNSTILE_INTAKE_URL"`
	// GatewayURL is the base URL of the gateway's native event streams; set it when a front door
	// runs apart from the gateway. Defaults to this process.
	GatewayURL string `env:"TURNSTILE_GATEWAY_URL"`
}

func (s FrontDoorSettings) validate() []error {
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"TURNSTILE_INTAKE_URL", s.IntakeURL},
		{"TURNSTILE_GATEWAY_URL", s.GatewayURL},
	} {
		if v.value == "" {
			continue
		}
		if u, err := url.Parse(v.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New(v.name+": must be an http:// or https:// URL"))
		}
	}
	return errs
}
