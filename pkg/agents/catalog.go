package agents

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/turnstile-run/turnstile/pkg/config"
)

// DefaultName is the name of the single agent of an installation without an agents file.
const DefaultName = "agent"

// Adapters are the adapters an agent may name.
var Adapters = []string{"demo", "openai", "http", "a2a"}

// nameRE is what a name may be: lower-case letters, digits and inner hyphens.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// reserved names would make an agent's topic another topic's name (turns.dlq), or its A2A
// endpoint (/a2a/{agent}) the default agent's HTTP+JSON binding (/a2a/rest).
var reserved = []string{"dlq", "rest"}

// ValidName reports whether name may name an agent.
func ValidName(name string) bool { return nameRE.MatchString(name) && !slices.Contains(reserved, name) }

// Limits bound one agent's work.
type Limits struct {
	// InFlight bounds the agent's turns one worker runs at once (TURNSTILE_WORKER_MAX_INFLIGHT
	// when left out).
	InFlight int `json:"in_flight"`
	// MaxAttempts is how many attempts a turn of the agent gets (TURNSTILE_MAX_ATTEMPTS).
	MaxAttempts int `json:"max_attempts"`
	// DefaultDeadline is the deadline of a turn of the agent that names none
	// (TURNSTILE_DEFAULT_DEADLINE).
	DefaultDeadline time.Duration `json:"-"`
	// Upstream limits, as TURNSTILE_UPSTREAM_INITIAL_LIMIT, _MAX_LIMIT and _TOTAL_LIMIT.
	UpstreamInitial int `json:"upstream_initial"`
	UpstreamMax     int `json:"upstream_max"`
	UpstreamTotal   int `json:"upstream_total"`
}

// Skill is one skill an agent's A2A card lists.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Card is what the agent's A2A Agent Card publishes beyond what turnstile fills in.
type Card struct {
	Name        string  `json:"name,omitempty"`
	Description string  `json:"description,omitempty"`
	Skills      []Skill `json:"skills,omitempty"`
}

// Assistant is what the LangGraph front door publishes for the agent.
type Assistant struct {
	GraphID     string         `json:"graph_id,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Agent is one agent of the catalog, its settings complete (what the file left out filled in from
// the TURNSTILE_* variables).
type Agent struct {
	Name        string
	Version     string
	Description string
	// Adapter is demo, openai, http or a2a.
	Adapter string
	// Settings are the adapter's settings, endpoints and pool policy; the upstream limits in it
	// equal Limits'.
	Settings config.AgentSettings
	// DemoDelay is the demo adapter's pause before each word.
	DemoDelay time.Duration
	Limits    Limits
	Card      Card
	Assistant Assistant
}

// GraphID is the LangGraph graph the agent's assistant serves: the catalog's graph_id, else the
// agent's name.
func (a Agent) GraphID() string {
	if a.Assistant.GraphID != "" {
		return a.Assistant.GraphID
	}
	return a.Name
}

// RegistryEntry is the endpoint entry that names the agent's registrations in the agent registry
// (docs/REGISTRY.md): the workers follow a snapshot of them.
const RegistryEntry = "registry"

// Endpoints are the entries of the agent's upstream pool: its endpoints list, else the adapter's
// one URL (none for demo).
func (a Agent) Endpoints() []string {
	if list := a.Settings.AgentEndpointList(); len(list) > 0 {
		return list
	}
	var single string
	switch a.Adapter {
	case "openai":
		single = a.Settings.OpenAIBaseURL
	case "http":
		single = a.Settings.HTTPAgentURL
	case "a2a":
		single = a.Settings.A2AURL
	}
	if single == "" {
		return nil
	}
	return []string{single}
}

// FollowsRegistry reports whether the agent's endpoints include its registry registrations.
func (a Agent) FollowsRegistry() bool {
	for _, e := range a.Endpoints() {
		if strings.TrimSpace(e) == RegistryEntry {
			return true
		}
	}
	return false
}

// SwapsEndpoints reports whether a running worker can move from old's endpoints to a's in place:
// the same adapter, and the registry snapshot (a follower started with the worker) neither added
// nor dropped.
func (a Agent) SwapsEndpoints(old Agent) bool {
	return a.Adapter == old.Adapter && a.FollowsRegistry() == old.FollowsRegistry()
}

// restartSettings are the agent's settings less its endpoints and upstream limits, which Diff
// compares on their own.
func (a Agent) restartSettings() config.AgentSettings {
	s := a.Settings
	s.AgentEndpoints = ""
	s.UpstreamInitialLimit, s.UpstreamMaxLimit, s.UpstreamTotalLimit = 0, 0, 0
	switch a.Adapter {
	case "openai":
		s.OpenAIBaseURL = ""
	case "http":
		s.HTTPAgentURL = ""
	case "a2a":
		s.A2AURL = ""
	}
	return s
}

// Catalog is an immutable set of agents and which of them is the default.
type Catalog struct {
	// Default is the name of the agent a turn that names none goes to.
	Default string
	// Source is the file the catalog was read from, empty for the one built from the variables.
	Source string
	agents []Agent // sorted by name
}

// Agents returns the agents sorted by name. The slice is the caller's.
func (c *Catalog) Agents() []Agent { return slices.Clone(c.agents) }

// Names returns the agents' names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.agents))
	for i, a := range c.agents {
		out[i] = a.Name
	}
	return out
}

// Get returns the agent named name; the empty name is the default agent.
func (c *Catalog) Get(name string) (Agent, bool) {
	if name == "" {
		name = c.Default
	}
	i, ok := slices.BinarySearchFunc(c.agents, name, func(a Agent, n string) int { return strings.Compare(a.Name, n) })
	if !ok {
		return Agent{}, false
	}
	return c.agents[i], true
}

// Resolve is the name a turn that names name goes to: name itself, or the default for the empty name.
func (c *Catalog) Resolve(name string) string {
	if name == "" {
		return c.Default
	}
	return name
}

// Topic is the Kafka topic of an agent's turns: base (TURNSTILE_KAFKA_TOPIC) for the default agent
// and for the empty name, base.<name> for any other. A record written before agents had names
// (no agent in its envelope) is the default agent's and is in base already.
func (c *Catalog) Topic(base, name string) string { return Topic(base, c.Default, name) }

// Topic is Catalog.Topic for a catalog whose default agent is def.
func Topic(base, def, name string) string {
	if name == "" || name == def {
		return base
	}
	return base + "." + name
}

// ConsumerGroup is the consumer group of the workers serving an agent: base
// (TURNSTILE_CONSUMER_GROUP) for the default agent, base.<name> for any other.
func ConsumerGroup(base, def, name string) string { return Topic(base, def, name) }

// FromConfig is the catalog of an installation without an agents file: one agent named "agent"
// built from TURNSTILE_AGENT and the settings of cfg.
func FromConfig(cfg config.Config) *Catalog {
	a := Agent{Name: DefaultName, Adapter: cfg.Agent}
	fill(&a, cfg)
	return &Catalog{Default: DefaultName, agents: []Agent{a}}
}

// fill completes a with cfg's values where a leaves them out.
func fill(a *Agent, cfg config.Config) {
	base := cfg.Agents
	s := &a.Settings
	or := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	or(&s.OpenAIBaseURL, base.OpenAIBaseURL)
	or(&s.OpenAIAPIKey, base.OpenAIAPIKey)
	or(&s.OpenAIModel, base.OpenAIModel)
	or(&s.OpenAISystem, base.OpenAISystem)
	or(&s.HTTPAgentURL, base.HTTPAgentURL)
	or(&s.HTTPAgentAuthorization, base.HTTPAgentAuthorization)
	or(&s.A2AURL, base.A2AURL)
	or(&s.AgentEndpoints, base.AgentEndpoints)
	or(&s.AgentPolicy, base.AgentPolicy)
	// What the file cannot set comes from the variables as it is.
	s.HTTPAgentIdleTimeout, s.HTTPAgentMaxBytes, s.HeaderTimeout = base.HTTPAgentIdleTimeout, base.HTTPAgentMaxBytes, base.HeaderTimeout
	s.HistoryCacheSessions = base.HistoryCacheSessions
	s.UpstreamLatencyTarget, s.UpstreamRetryRatio, s.UpstreamRetryReserve = base.UpstreamLatencyTarget, base.UpstreamRetryRatio, base.UpstreamRetryReserve
	s.AgentLoadFactor, s.AgentEjectFailures, s.AgentEjectTime, s.AgentEjectMaxTime = base.AgentLoadFactor, base.AgentEjectFailures, base.AgentEjectTime, base.AgentEjectMaxTime
	s.AgentPanicThreshold, s.AgentProbePath, s.AgentProbeInterval = base.AgentPanicThreshold, base.AgentProbePath, base.AgentProbeInterval
	s.AgentResolveInterval, s.AgentAffinityIdle = base.AgentResolveInterval, base.AgentAffinityIdle
	l := &a.Limits
	orInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	orInt(&l.InFlight, cfg.MaxInflight)
	orInt(&l.MaxAttempts, cfg.MaxAttempts)
	orInt(&l.UpstreamInitial, base.UpstreamInitialLimit)
	orInt(&l.UpstreamMax, base.UpstreamMaxLimit)
	orInt(&l.UpstreamTotal, base.UpstreamTotalLimit)
	if l.DefaultDeadline == 0 {
		l.DefaultDeadline = cfg.DefaultDeadline
	}
	s.UpstreamInitialLimit, s.UpstreamMaxLimit, s.UpstreamTotalLimit = l.UpstreamInitial, l.UpstreamMax, l.UpstreamTotal
	if a.DemoDelay == 0 {
		a.DemoDelay = cfg.DemoDelay
	}
	if a.Card.Name == "" {
		a.Card.Name = a.Name
	}
}

//go:embed schema.json
var schemaJSON []byte

// Schema is the JSON Schema an agents file is checked against.
func Schema() []byte { return slices.Clone(schemaJSON) }

var compiled = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic("agents: schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	const url = "turnstile:///agents.json"
	if err := c.AddResource(url, doc); err != nil {
		panic("agents: schema: " + err.Error())
	}
	return c.MustCompile(url)
}()

// file is an agents file as written.
type file struct {
	Default string      `json:"default"`
	Agents  []fileAgent `json:"agents"`
}

type fileAgent struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
	Adapter     string `json:"adapter"`
	OpenAI      *struct {
		BaseURL   string `json:"base_url"`
		Model     string `json:"model"`
		System    string `json:"system"`
		APIKeyEnv string `json:"api_key_env"`
	} `json:"openai"`
	HTTP *struct {
		URL              string `json:"url"`
		AuthorizationEnv string `json:"authorization_env"`
	} `json:"http"`
	A2A *struct {
		URL string `json:"url"`
	} `json:"a2a"`
	Endpoints []string `json:"endpoints"`
	Policy    string   `json:"policy"`
	Limits    *struct {
		InFlight        int    `json:"in_flight"`
		MaxAttempts     int    `json:"max_attempts"`
		DefaultDeadline string `json:"default_deadline"`
		UpstreamInitial int    `json:"upstream_initial"`
		UpstreamMax     int    `json:"upstream_max"`
		UpstreamTotal   int    `json:"upstream_total"`
	} `json:"limits"`
	Card      Card      `json:"card"`
	Assistant Assistant `json:"assistant"`
}

// Error is an agents file refused: every problem found, each naming where it is.
type Error struct {
	Source   string
	Problems []string
}

func (e *Error) Error() string {
	src := "agents file"
	if e.Source != "" {
		src += " " + e.Source
	}
	return fmt.Sprintf("%s: %d error(s): %s", src, len(e.Problems), strings.Join(e.Problems, "; "))
}

// Load reads the agents file at path; cfg gives what an agent leaves out. The empty path is the
// catalog of FromConfig.
func Load(path string, cfg config.Config) (*Catalog, error) {
	if path == "" {
		return FromConfig(cfg), nil
	}
	raw, err := os.ReadFile(path) //nolint:gosec // the operator names the file (TURNSTILE_AGENTS_FILE)
	if err != nil {
		return nil, fmt.Errorf("read agents file: %w", err)
	}
	c, err := Parse(raw, cfg)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.Source = path
		}
		return nil, err
	}
	c.Source = path
	return c, nil
}

// Parse reads an agents file's content (YAML, of which JSON is a part); cfg gives what an agent
// leaves out. It returns an *Error listing every problem.
func Parse(raw []byte, cfg config.Config) (*Catalog, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, &Error{Problems: []string{"not YAML or JSON: " + err.Error()}}
	}
	// Through JSON, so the schema sees JSON's types whatever YAML made of the values.
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{Problems: []string{"not representable as JSON: " + err.Error()}}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, &Error{Problems: []string{err.Error()}}
	}
	var problems []string
	if err := compiled.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, &Error{Problems: []string{err.Error()}}
		}
		problems = schemaProblems(ve)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil && len(problems) == 0 {
		problems = append(problems, err.Error())
	}
	c := &Catalog{Default: f.Default}
	seen := map[string]int{}
	for i, fa := range f.Agents {
		at := fmt.Sprintf("/agents/%d", i)
		if j, dup := seen[fa.Name]; dup && fa.Name != "" {
			problems = append(problems, fmt.Sprintf("%s/name: duplicate agent name %q (also /agents/%d)", at, fa.Name, j))
		} else {
			seen[fa.Name] = i
		}
		if slices.Contains(reserved, fa.Name) {
			problems = append(problems, fmt.Sprintf("%s/name: %q is reserved", at, fa.Name))
		}
		a, ps := fa.resolve(at, cfg)
		problems = append(problems, ps...)
		c.agents = append(c.agents, a)
	}
	switch {
	case c.Default != "":
		if _, ok := seen[c.Default]; !ok {
			problems = append(problems, fmt.Sprintf("/default: names no agent of the file (%q)", c.Default))
		}
	case len(f.Agents) > 0:
		if _, ok := seen[DefaultName]; ok {
			c.Default = DefaultName
		} else {
			c.Default = f.Agents[0].Name
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	slices.SortFunc(c.agents, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// resolve turns a file's agent into a complete Agent, with the problems the schema cannot see.
func (fa fileAgent) resolve(at string, cfg config.Config) (Agent, []string) {
	var problems []string
	a := Agent{Name: fa.Name, Version: fa.Version, Description: fa.Description, Adapter: fa.Adapter, Card: fa.Card, Assistant: fa.Assistant}
	s := &a.Settings
	if o := fa.OpenAI; o != nil {
		s.OpenAIBaseURL, s.OpenAIModel, s.OpenAISystem = o.BaseURL, o.Model, o.System
		if o.APIKeyEnv != "" {
			s.OpenAIAPIKey = os.Getenv(o.APIKeyEnv)
		}
	}
	if h := fa.HTTP; h != nil {
		s.HTTPAgentURL = h.URL
		if h.AuthorizationEnv != "" {
			s.HTTPAgentAuthorization = os.Getenv(h.AuthorizationEnv)
		}
	}
	if x := fa.A2A; x != nil {
		s.A2AURL = x.URL
	}
	s.AgentEndpoints, s.AgentPolicy = strings.Join(fa.Endpoints, ","), fa.Policy
	if l := fa.Limits; l != nil {
		a.Limits = Limits{InFlight: l.InFlight, MaxAttempts: l.MaxAttempts, UpstreamInitial: l.UpstreamInitial, UpstreamMax: l.UpstreamMax, UpstreamTotal: l.UpstreamTotal}
		if l.DefaultDeadline != "" {
			d, err := time.ParseDuration(l.DefaultDeadline)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s/limits/default_deadline: %v", at, err))
			case d <= cfg.MinUsefulTime:
				problems = append(problems, fmt.Sprintf("%s/limits/default_deadline: must exceed TURNSTILE_MIN_USEFUL_TIME (%s)", at, cfg.MinUsefulTime))
			default:
				a.Limits.DefaultDeadline = d
			}
		}
	}
	fill(&a, cfg)
	if !slices.Contains(Adapters, a.Adapter) {
		problems = append(problems, fmt.Sprintf("%s/adapter: unknown adapter %q (%s)", at, a.Adapter, strings.Join(Adapters, ", ")))
	}
	if a.Limits.UpstreamMax < a.Limits.UpstreamInitial {
		problems = append(problems, fmt.Sprintf("%s/limits/upstream_max: must be at least upstream_initial (%d < %d)", at, a.Limits.UpstreamMax, a.Limits.UpstreamInitial))
	}
	if a.Adapter == "openai" && a.Settings.OpenAIBaseURL == "" && a.Settings.AgentEndpoints == "" {
		problems = append(problems, at+"/openai/base_url: required for adapter openai unless endpoints are listed")
	}
	return a, problems
}

var printer = message.NewPrinter(language.English)

// schemaProblems flattens a validation error into one line per failed keyword, each with its place.
func schemaProblems(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := "/" + strings.Join(e.InstanceLocation, "/")
			if len(e.InstanceLocation) == 3 && e.InstanceLocation[2] == "adapter" {
				return // resolve names the unknown adapter itself
			}
			out = append(out, at+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	return slices.Compact(out)
}
