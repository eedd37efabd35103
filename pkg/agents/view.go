package agents

// View is how the API shows an agent (GET /v1/agents): its settings without secrets (API keys and
// authorization values are never shown).
type View struct {
	Name        string     `json:"name"`
	Version     string     `json:"version,omitempty"`
	Description string     `json:"description,omitempty"`
	Default     bool       `json:"default"`
	Adapter     string     `json:"adapter"`
	Model       string     `json:"model,omitempty"`
	Endpoints   []string   `json:"endpoints,omitempty"`
	Policy      string     `json:"policy,omitempty"`
	Limits      LimitsView `json:"limits"`
	Card        Card       `json:"card"`
	Assistant   Assistant  `json:"assistant"`
}

// LimitsView is Limits as the API shows them, the deadline in milliseconds.
type LimitsView struct {
	InFlight          int   `json:"in_flight"`
	MaxAttempts       int   `json:"max_attempts"`
	DefaultDeadlineMs int64 `json:"default_deadline_ms"`
	UpstreamInitial   int   `json:"upstream_initial"`
	UpstreamMax       int   `json:"upstream_max"`
	UpstreamTotal     int   `json:"upstream_total"`
}

// View returns how the API shows agent a of c.
func (c *Catalog) View(a Agent) View {
	v := View{
		Name: a.Name, Version: a.Version, Description: a.Description, Default: a.Name == c.Default, Adapter: a.Adapter,
		Limits: LimitsView{
			InFlight: a.Limits.InFlight, MaxAttempts: a.Limits.MaxAttempts, DefaultDeadlineMs: a.Limits.DefaultDeadline.Milliseconds(),
			UpstreamInitial: a.Limits.UpstreamInitial, UpstreamMax: a.Limits.UpstreamMax, UpstreamTotal: a.Limits.UpstreamTotal,
		},
		Card: a.Card, Assistant: a.Assistant,
	}
	v.Assistant.GraphID = a.GraphID()
	if a.Adapter != "demo" {
		v.Endpoints, v.Policy = a.Settings.AgentEndpointList(), a.Settings.AgentPolicy
		switch a.Adapter {
		case "openai":
			v.Model = a.Settings.OpenAIModel
			if len(v.Endpoints) == 0 {
				v.Endpoints = []string{a.Settings.OpenAIBaseURL}
			}
		case "http":
			if len(v.Endpoints) == 0 {
				v.Endpoints = []string{a.Settings.HTTPAgentURL}
			}
		case "a2a":
			if len(v.Endpoints) == 0 {
				v.Endpoints = []string{a.Settings.A2AURL}
			}
		}
	}
	return v
}
