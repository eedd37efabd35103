package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/streamtoken"
)

// Auth defaults.
const (
	AuthDefault           = "off"
	StreamTokenTTLDefault = streamtoken.TTLDefault
)

// AuthSettings configure API keys and stream tokens.
type AuthSettings struct {
	// Mode is "on" (API keys required at intake and the front doors, stream tokens at the
	// gateway) or "off" (development only, and the log says so loudly). Defaults to off.
	Mode string `env:"TURNSTILE_AUTH"`
	// StreamTokenKeys is a comma list of "<key id>:<base64 secret>"; the first signs new stream
	// tokens and all verify, so keys rotate by prepending a new one. Required with
	// TURNSTILE_AUTH=on. Defaults to none, and with auth off to a random key made per process.
	StreamTokenKeys string `env:"TURNSTILE_STREAM_TOKEN_KEYS" secret:"true"`
	// StreamTokenTTL is how long a stream token is valid. Defaults to 1h.
	StreamTokenTTL time.Duration `env:"TURNSTILE_STREAM_TOKEN_TTL"`
}

// Enabled reports whether API keys and stream tokens are enforced.
func (s AuthSettings) Enabled() bool { return s.Mode == "on" }

// SigningKey is one stream-token key, as package streamtoken takes it.
type SigningKey = streamtoken.Key

// Keys parses StreamTokenKeys. A malformed entry is named by its position (1 is the first) and
// never quoted: an entry whose ID was left out is the secret itself, and errors end up in logs.
func (s AuthSettings) Keys() ([]SigningKey, error) {
	var out []SigningKey
	for i, part := range splitList(s.StreamTokenKeys) {
		id, secret, ok := strings.Cut(part, ":")
		if !ok || id == "" {
			return nil, fmt.Errorf("TURNSTILE_STREAM_TOKEN_KEYS: entry %d is not <key id>:<base64 secret>", i+1)
		}
		b, err := base64.StdEncoding.DecodeString(secret)
		if err != nil {
			if b, err = base64.RawURLEncoding.DecodeString(secret); err != nil {
				return nil, fmt.Errorf("TURNSTILE_STREAM_TOKEN_KEYS: key %q is not base64", id)
			}
		}
		if len(b) < 16 {
			return nil, fmt.Errorf("TURNSTILE_STREAM_TOKEN_KEYS: key %q is shorter than 16 bytes", id)
		}
		out = append(out, SigningKey{ID: id, Secret: b})
	}
	return out, nil
}

func (s *AuthSettings) applyDefaults() {
	if s.Mode == "" {
		s.Mode = AuthDefault
	}
	if s.StreamTokenTTL == 0 {
		s.StreamTokenTTL = StreamTokenTTLDefault
	}
}

func (s AuthSettings) validate() []error {
	var errs []error
	if s.Mode != "on" && s.Mode != "off" {
		errs = append(errs, errors.New("TURNSTILE_AUTH: must be on or off"))
	}
	keys, err := s.Keys()
	if err != nil {
		errs = append(errs, err)
	}
	if s.Mode == "on" && err == nil && len(keys) == 0 {
		errs = append(errs, errors.New("TURNSTILE_STREAM_TOKEN_KEYS: required when TURNSTILE_AUTH=on"))
	}
	if s.StreamTokenTTL < time.Second {
		errs = append(errs, errors.New("TURNSTILE_STREAM_TOKEN_TTL: must be at least 1s"))
	}
	return errs
}
