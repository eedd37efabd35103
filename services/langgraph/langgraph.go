package langgraph

import (
	"context"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/api"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/web"
)

// Role builds the langgraph role from shared deps.
var Role = app.Role{Name: "langgraph", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// LangGraph is the running role; it has no background work of its own. Drain and Stop end every
// open run stream without an end event, so each client rejoins (with Last-Event-ID) on another
// replica. A stopped one has ended its streams for good.
type LangGraph struct {
	app.StreamShell
	handler *api.Handler
}

// New builds the role; ctx bounds the first connection to Postgres, which holds the thread table
// and may be down (the pool then connects when Postgres answers, and thread routes answer 503
// until it does).
func New(ctx context.Context, d *app.Deps) (*LangGraph, error) {
	cfg := d.Config
	log := d.Log.With("role", "langgraph")
	place, err := cfg.Region.Local()
	if err != nil {
		return nil, err
	}
	pool, err := d.PostgresOrLazy(ctx, log, "thread routes answer 503 until it answers")
	if err != nil {
		return nil, err
	}
	// Its streams count against the process's one budget, with every other door's.
	fdc := frontdoor.FromConfig(cfg, d.LocalURL())
	fdc.Admission, fdc.Door, fdc.Tenants = d.Admission(), admission.DoorLangGraph, cfg.Auth.Enabled()
	fd := frontdoor.New(fdc)
	catalog, err := d.Agents()
	if err != nil {
		return nil, err
	}
	assistants := catalogAssistants{w: catalog, configured: cfg.LangGraph.AssistantList()}
	h := api.New(api.Config{
		Assistants: assistants.configured, Describe: assistants.describe, Agents: assistants, Auth: cfg.Auth.Enabled(),
		CORSOrigins: cfg.LangGraph.CORSOriginList(), Version: app.BuildInfo().Version,
		KeepAlive: cfg.KeepAlive, MaxBody: cfg.MaxBody, RetryAfter: cfg.Intake.RetryAfter,
		Region: place, ThreadsMax: cfg.LangGraph.ThreadsMax, MetadataMax: cfg.LangGraph.MetadataMax,
		StoreItemsMax: cfg.LangGraphStore.ItemsMax, StoreValueMax: cfg.LangGraphStore.ValueMax,
	}, fd, pool, log, d.Registry)
	return &LangGraph{handler: h, StreamShell: app.NewStreamShell(app.ShellConfig{
		Name: "langgraph",
		// Drain waits for the streams it ends within ctx: whether they ended is whether ctx did not.
		Drain: func(ctx context.Context) {
			h.Drain(ctx)
			_ = h.Wait(ctx)
		},
		Wait: func(ctx context.Context) error { return ctx.Err() },
		// The catalog reloads while the role runs (its Start and Stop are safe twice).
		Parts: new(lifecycle.Group).Add("agents catalog", catalog),
	})}, nil
}

// Routes mounts LangGraph's paths and the useStream demo page.
func (l *LangGraph) Routes(r chi.Router) {
	l.handler.Routes(r)
	web.Routes(r)
}

// CutStreams ends every open run stream without an end event while the role keeps serving, so
// clients rejoin here with Last-Event-ID. Tests use it to cut connections mid-run.
func (l *LangGraph) CutStreams() { l.handler.Cut() }

// catalogAssistants are the assistants of the agent catalog (pkg/agents), as the catalog is at
// each call: every agent is an assistant under its name; an assistant ID resolves to the agent of
// that name, else to the first agent (by name) whose assistant graph_id it is, else — for an ID
// of TURNSTILE_LANGGRAPH_ASSISTANTS — to the default agent.
type catalogAssistants struct {
	w          *agents.Watcher
	configured []string
}

// IDs are the catalog's agents' names.
func (c catalogAssistants) IDs() []string { return c.w.Catalog().Names() }

// AgentOf resolves assistantID to its agent ("" for the default agent).
func (c catalogAssistants) AgentOf(assistantID string) (string, bool) {
	a, ok := c.agent(assistantID)
	if !ok {
		return "", false
	}
	if a.Name == c.w.Catalog().Default {
		return "", true
	}
	return a.Name, true
}

// agent is the catalog agent assistantID resolves to.
func (c catalogAssistants) agent(assistantID string) (agents.Agent, bool) {
	cat := c.w.Catalog()
	if assistantID == "" {
		return agents.Agent{}, false
	}
	if a, ok := cat.Get(assistantID); ok {
		return a, true
	}
	for _, a := range cat.Agents() {
		if a.Assistant.GraphID == assistantID {
			return a, true
		}
	}
	if slices.Contains(c.configured, assistantID) {
		return cat.Get("")
	}
	return agents.Agent{}, false
}

// describe describes an assistant from its agent's assistant card (graph_id, name, description,
// metadata, and the agent's name as metadata.agent).
func (c catalogAssistants) describe(id string) (api.AssistantInfo, bool) {
	a, ok := c.agent(id)
	if !ok {
		return api.AssistantInfo{}, false
	}
	name := a.Assistant.Name
	if name == "" {
		name = id
	}
	desc := a.Assistant.Description
	if desc == "" {
		desc = a.Description
	}
	md := map[string]any{"agent": a.Name}
	for k, v := range a.Assistant.Metadata {
		md[k] = v
	}
	return api.AssistantInfo{GraphID: a.GraphID(), Name: name, Description: desc, Metadata: md}, true
}
