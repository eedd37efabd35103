package card

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
)

// ProtocolVersion is the A2A protocol version the front door speaks.
const ProtocolVersion = "0.3.0"

// SchemeName names the API-key security scheme on the card.
const SchemeName a2a.SecuritySchemeName = "apiKey"

// New returns the card for the settings; rpcPath is the JSON-RPC endpoint's path under s.URL. With
// s.URL empty the card's URL is left empty for the handler to fill from each request's origin.
func New(s config.A2ASettings, authOn bool, rpcPath string) *a2a.AgentCard {
	c := &a2a.AgentCard{
		Name: s.Name, Description: s.Description, Version: s.Version, ProtocolVersion: ProtocolVersion,
		URL: urlOf(s.URL, rpcPath), PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
	for _, sk := range s.SkillList() {
		c.Skills = append(c.Skills, a2a.AgentSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: []string{sk.ID}})
	}
	if authOn {
		c.SecuritySchemes = a2a.NamedSecuritySchemes{SchemeName: a2a.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "a turnstile API key: Authorization: Bearer <API key>",
		}}
		c.Security = []a2a.SecurityRequirements{{SchemeName: a2a.SecuritySchemeScopes{}}}
	}
	return c
}

// ForAgent returns the card of the catalog's agent a, served at rpcPath (rpc.AgentPath): New's card
// with what the catalog's card publishes (name, description, skills) and the agent's version in
// place of the settings' (each only when the catalog sets it); an agent whose catalog card names
// nothing is shown under its own name.
func ForAgent(s config.A2ASettings, authOn bool, rpcPath string, a agents.Agent) *a2a.AgentCard {
	c := New(s, authOn, rpcPath)
	c.Name = a.Name
	if a.Card.Name != "" {
		c.Name = a.Card.Name
	}
	if a.Card.Description != "" {
		c.Description = a.Card.Description
	} else if a.Description != "" {
		c.Description = a.Description
	}
	if a.Version != "" {
		c.Version = a.Version
	}
	if len(a.Card.Skills) > 0 {
		c.Skills = c.Skills[:0]
		for _, sk := range a.Card.Skills {
			tags := sk.Tags
			if len(tags) == 0 {
				tags = []string{sk.ID}
			}
			c.Skills = append(c.Skills, a2a.AgentSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: tags})
		}
	}
	return c
}

func urlOf(base, path string) string {
	if base == "" {
		return ""
	}
	return base + path
}
