package rpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

type agentKey struct{}

// WithAgent returns ctx naming the catalog's agent a request is for (its /a2a/{agent} path).
func WithAgent(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, agentKey{}, name)
}

// AgentOf is the agent ctx names (WithAgent), empty for the default agent.
func AgentOf(ctx context.Context) string {
	name, _ := ctx.Value(agentKey{}).(string)
	return name
}

// AgentPath is the JSON-RPC endpoint of the catalog's agent name; its Agent Card is at
// AgentPath(name) + "/.well-known/agent-card.json" and its HTTP+JSON binding under
// AgentPath(name) + "/rest". The root paths (Path, RESTPath, the root card) serve the default agent.
func AgentPath(name string) string { return Path + "/" + name }

// NoAgent answers a request for an agent the catalog does not have, before anything of it is
// read: 404 with a JSON-RPC error (invalid request, the agent named in its data) on the JSON-RPC
// endpoint, a google.rpc.Status of NOT_FOUND on the HTTP+JSON binding, a problem document on the
// card's path.
func (s *Server) NoAgent(w http.ResponseWriter, r *http.Request, name string) {
	msg := fmt.Sprintf("no agent named %q (GET /v1/agents lists them)", name)
	rest := strings.HasPrefix(strings.TrimPrefix(r.URL.Path, AgentPath(name)), "/rest/")
	s.requests.WithLabelValues("unknown", "agent_not_found").Inc()
	switch {
	case strings.HasSuffix(r.URL.Path, "/agent-card.json"):
		httpx.WriteProblem(w, httpx.ProblemAgentNotFound.Problem(msg))
	case rest:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"error":{"code":404,"status":"NOT_FOUND","message":%q}}`+"\n", msg)
	default:
		writeRPCError(w, http.StatusNotFound, nil, errorObject(fmt.Errorf("%s: %w", msg, a2a.ErrInvalidRequest)))
	}
}
