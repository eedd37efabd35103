package config

import (
	"errors"
	"net/url"
	"strings"
	"time"
)

// A2A defaults.
const (
	A2ANameDefault        = "turnstile"
	A2ADescriptionDefault = "An agent hosted by turnstile: every task runs as a queue-backed turn."
	A2AVersionDefault     = "1.0.0"
	A2ASkillsDefault      = "chat:Chat:Answers a message"
	A2AMaxBlockDefault    = 60 * time.Second
)

// A2ASettings are the A2A front door's settings: what its Agent Card says, and how long a
// blocking message/send waits. Every replica serves the card from these alone.
type A2ASettings struct {
	// Name is the a2a role's Agent Card name. Defaults to turnstile.
	Name string `env:"TURNSTILE_A2A_NAME"`
	// Description is the Agent Card's description. Defaults to a sentence about turnstile.
	Description string `env:"TURNSTILE_A2A_DESCRIPTION"`
	// Version is the agent's version on its card. Defaults to 1.0.0.
	Version string `env:"TURNSTILE_A2A_VERSION"`
	// Skills is a comma list of "<id>:<name>:<description>" skills for the card. Defaults to
	// "chat:Chat:Answers a message".
	Skills string `env:"TURNSTILE_A2A_SKILLS"`
	// URL is the public base URL clients reach the a2a role at; the card names <URL>/a2a as the
	// JSON-RPC endpoint. Defaults to none: the base URL each card request came to (its Host, or
	// X-Forwarded-Host and X-Forwarded-Proto when a trusted proxy sent it).
	URL string `env:"TURNSTILE_A2A_PUBLIC_URL"`
	// CORSOrigins is a comma list of origins whose pages may call the JSON-RPC endpoint from a
	// browser ("*" allows any); the preflight and every answer name the origin, never
	// credentials (keys travel as Authorization: Bearer). Defaults to none: same origin only.
	CORSOrigins string `env:"TURNSTILE_A2A_CORS_ORIGINS"`
	// MaxBlock bounds how long a blocking message/send waits for its task to end or wait for the
	// user; after it the task is answered as it stands. Defaults to 60s.
	MaxBlock time.Duration `env:"TURNSTILE_A2A_MAX_BLOCK"`
}

// CORSOriginList splits CORSOrigins.
func (s A2ASettings) CORSOriginList() []string { return splitList(s.CORSOrigins) }

// A2ASkill is one skill of A2ASettings.Skills.
type A2ASkill struct{ ID, Name, Description string }

func (s *A2ASettings) applyDefaults() {
	str := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	str(&s.Name, A2ANameDefault)
	str(&s.Description, A2ADescriptionDefault)
	str(&s.Version, A2AVersionDefault)
	str(&s.Skills, A2ASkillsDefault)
	s.URL = strings.TrimRight(s.URL, "/")
	if s.MaxBlock == 0 {
		s.MaxBlock = A2AMaxBlockDefault
	}
}

// SkillList parses Skills; entries that are not <id>:<name>:<description> are left out (validate
// reports them).
func (s A2ASettings) SkillList() []A2ASkill {
	var out []A2ASkill
	for _, e := range splitList(s.Skills) {
		parts := strings.SplitN(e, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			continue
		}
		out = append(out, A2ASkill{ID: parts[0], Name: parts[1], Description: parts[2]})
	}
	return out
}

func (s A2ASettings) validate() []error {
	u, err := url.Parse(s.URL)
	checks := []struct {
		bad bool
		msg string
	}{
		{len(s.SkillList()) != len(splitList(s.Skills)) || len(s.SkillList()) == 0, "TURNSTILE_A2A_SKILLS: must be a comma list of <id>:<name>:<description>"},
		{s.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == ""), "TURNSTILE_A2A_PUBLIC_URL: must be an http or https URL"},
		{s.MaxBlock < 100*time.Millisecond || s.MaxBlock > 10*time.Minute, "TURNSTILE_A2A_MAX_BLOCK: must be between 100ms and 10m"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}
