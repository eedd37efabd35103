package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// agents is the current catalog.
func (h *Handler) agents() *agents.Catalog { return h.cfg.Agents() }

// agentsList is the body of GET /v1/agents.
type agentsList struct {
	Default string        `json:"default"`
	Agents  []agents.View `json:"agents"`
}

func (h *Handler) listAgents(w http.ResponseWriter, _ *http.Request) {
	c := h.agents()
	out := agentsList{Default: c.Default, Agents: []agents.View{}}
	for _, a := range c.Agents() {
		out.Agents = append(out.Agents, c.View(a))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) getAgent(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	c := h.agents()
	a, ok := c.Get(name)
	if !ok || name == "" {
		httpx.WriteProblem(w, httpx.ProblemAgentNotFound.Problem(fmt.Sprintf("no agent named %q", name)))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, c.View(a))
}

// ensureTopic makes sure an agent's topic exists before the first record goes to it: an agent
// added to the catalog of a running installation has no topic until its first turn (or a worker
// serving it) creates one. The default agent's topic is the workers' to create, as before.
func (h *Handler) ensureTopic(ctx context.Context, topic string) error {
	if h.d.EnsureTopic == nil || topic == h.cfg.Topic {
		return nil
	}
	if _, ok := h.topics.Load(topic); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ProduceTimeout)
	defer cancel()
	if err := h.d.EnsureTopic(ctx, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	h.topics.Store(topic, struct{}{})
	return nil
}
