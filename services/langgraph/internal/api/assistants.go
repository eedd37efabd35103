package api

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// AssistantInfo describes an assistant runs may name: the graph it serves and how it is shown.
// Config.Describe answers it from the agent catalog (pkg/agents); without one every assistant is
// the workers' agent under its own name.
type AssistantInfo struct {
	GraphID     string
	Name        string
	Description string
	Metadata    map[string]any
}

// assistantJSON is LangGraph's Assistant.
type assistantJSON struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

// assistantEpoch stands for the assistants' creation time: they come from configuration, not
// from an API call.
var assistantEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// assistant is the Assistant of a configured assistant ID.
func (h *Handler) assistant(id string) assistantJSON {
	info := AssistantInfo{GraphID: id, Name: id}
	if h.cfg.Describe != nil {
		if d, ok := h.cfg.Describe(id); ok {
			info = d
		}
	}
	if info.GraphID == "" {
		info.GraphID = id
	}
	if info.Name == "" {
		info.Name = id
	}
	md := map[string]any{}
	for k, v := range info.Metadata {
		md[k] = v
	}
	out := assistantJSON{
		AssistantID: id, GraphID: info.GraphID, Name: info.Name, Config: map[string]any{}, Context: map[string]any{},
		Metadata: md, Version: 1, CreatedAt: assistantEpoch, UpdatedAt: assistantEpoch,
	}
	if info.Description != "" {
		out.Description = &info.Description
	}
	return out
}

type assistantSearchBody struct {
	GraphID   string         `json:"graph_id"`
	Name      string         `json:"name"`
	Metadata  map[string]any `json:"metadata"`
	Limit     *int           `json:"limit"`
	Offset    int            `json:"offset"`
	SortBy    string         `json:"sort_by"`
	SortOrder string         `json:"sort_order"`
}

// searchAssistants answers POST /assistants/search: the assistants runs may name
// (TURNSTILE_LANGGRAPH_ASSISTANTS), filtered by graph_id, name (a substring) and metadata.
func (h *Handler) searchAssistants(w http.ResponseWriter, r *http.Request) {
	const route = "search_assistants"
	if _, p := h.authenticate(r); p != nil {
		h.refuse(w, route, *p)
		return
	}
	var body assistantSearchBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	limit := 10
	if body.Limit != nil {
		limit = *body.Limit
	}
	switch {
	case limit < 1 || limit > searchLimitMax || body.Offset < 0:
		h.refuse(w, route, httpx.ProblemValidation.Problem("limit must be between 1 and 1000 and offset not negative"))
		return
	case body.SortBy != "" && body.SortBy != "assistant_id" && body.SortBy != "graph_id" && body.SortBy != "name" &&
		body.SortBy != "created_at" && body.SortBy != "updated_at":
		h.refuse(w, route, httpx.ProblemValidation.Problem("sort_by must be assistant_id, graph_id, name, created_at or updated_at"))
		return
	}
	out := []assistantJSON{}
	for _, id := range h.assistantIDs() {
		a := h.assistant(id)
		if (body.GraphID != "" && a.GraphID != body.GraphID) || (body.Name != "" && !strings.Contains(a.Name, body.Name)) ||
			!contains(a.Metadata, toAny(body.Metadata)) {
			continue
		}
		out = append(out, a)
	}
	key := func(a assistantJSON) string {
		switch body.SortBy {
		case "graph_id":
			return a.GraphID
		case "name":
			return a.Name
		}
		return a.AssistantID
	}
	slices.SortStableFunc(out, func(a, b assistantJSON) int { return strings.Compare(key(a), key(b)) })
	if body.SortOrder == "desc" {
		slices.Reverse(out)
	}
	out = out[min(body.Offset, len(out)):]
	out = out[:min(limit, len(out))]
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
}

func toAny(m map[string]any) any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// assistantIDs are the assistants runs may name: TURNSTILE_LANGGRAPH_ASSISTANTS's and the catalog's
// agents', each once.
func (h *Handler) assistantIDs() []string {
	ids := slices.Clone(h.cfg.Assistants)
	if h.cfg.Agents != nil {
		for _, id := range h.cfg.Agents.IDs() {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// agentOf is the agent a run of the assistant goes to ("" for the default agent) and whether
// there is such an assistant.
func (h *Handler) agentOf(assistantID string) (string, bool) {
	if h.cfg.Agents != nil {
		return h.cfg.Agents.AgentOf(assistantID)
	}
	return "", h.assistants[assistantID]
}

// knownAssistant authenticates and finds the path's assistant, answering the refusal itself.
func (h *Handler) knownAssistant(w http.ResponseWriter, r *http.Request, route string) (assistantJSON, bool) {
	if _, p := h.authenticate(r); p != nil {
		h.refuse(w, route, *p)
		return assistantJSON{}, false
	}
	id := chi.URLParam(r, "assistant_id")
	if _, ok := h.agentOf(id); !ok {
		h.refuse(w, route, httpx.ProblemAssistantNotFound.Problem("no assistant "+id+" (TURNSTILE_LANGGRAPH_ASSISTANTS)"))
		return assistantJSON{}, false
	}
	return h.assistant(id), true
}

func (h *Handler) getAssistant(w http.ResponseWriter, r *http.Request) {
	const route = "get_assistant"
	if a, ok := h.knownAssistant(w, r, route); ok {
		h.ok(route)
		httpx.WriteJSON(w, http.StatusOK, a)
	}
}

// getGraph answers GET /assistants/{id}/graph: every assistant is one agent node between
// LangGraph's start and end.
func (h *Handler) getGraph(w http.ResponseWriter, r *http.Request) {
	const route = "get_graph"
	if _, ok := h.knownAssistant(w, r, route); !ok {
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"nodes": []map[string]any{
			{"id": "__start__", "type": "schema", "data": "__start__"},
			{"id": "agent", "type": "runnable", "data": map[string]any{"id": []string{"turnstile", "agent"}, "name": "agent"}},
			{"id": "__end__", "type": "schema", "data": "__end__"},
		},
		"edges": []map[string]any{{"source": "__start__", "target": "agent"}, {"source": "agent", "target": "__end__"}},
	})
}

// messagesSchema is the state every assistant has: its messages.
var messagesSchema = map[string]any{
	"title": "State", "type": "object",
	"properties": map[string]any{
		"messages": map[string]any{
			"title": "Messages", "type": "array",
			"items": map[string]any{
				"type": "object", "required": []string{"type", "content"},
				"properties": map[string]any{
					"type":    map[string]any{"type": "string", "enum": []string{"human", "ai", "tool"}},
					"content": map[string]any{"type": "string"},
					"id":      map[string]any{"type": "string"},
				},
			},
		},
	},
	"required": []string{"messages"},
}

// getSchemas answers GET /assistants/{id}/schemas: input, output and state are the messages; no
// configuration or context is taken.
func (h *Handler) getSchemas(w http.ResponseWriter, r *http.Request) {
	const route = "get_schemas"
	a, ok := h.knownAssistant(w, r, route)
	if !ok {
		return
	}
	h.ok(route)
	empty := map[string]any{"title": "Config", "type": "object", "properties": map[string]any{}}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"graph_id": a.GraphID, "input_schema": messagesSchema, "output_schema": messagesSchema,
		"state_schema": messagesSchema, "config_schema": empty, "context_schema": empty,
	})
}
