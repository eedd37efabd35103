package api

import (
	"net/http"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// info is GET /info as the LangGraph Platform answers it: the server's version, the flags that
// tell a client which optional APIs it may call, and the host's kind. agent-chat-ui calls it at
// load and refuses to start unless it answers 200; assistants (assistants.go) and crons (crons.go)
// are true, and the flags are false for what this front door does not serve (LangSmith tracing).
type info struct {
	Version string          `json:"version"`
	Flags   map[string]bool `json:"flags"`
	Host    map[string]any  `json:"host"`
}

func (h *Handler) getOK(w http.ResponseWriter, _ *http.Request) {
	h.ok("ok")
	httpx.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (h *Handler) getInfo(w http.ResponseWriter, _ *http.Request) {
	h.ok("info")
	httpx.WriteJSON(w, http.StatusOK, info{
		Version: h.cfg.Version,
		Flags:   map[string]bool{"assistants": true, "crons": true, "langsmith": false, "langsmith_tracing_replicas": false},
		Host:    map[string]any{"kind": "self-hosted", "project_id": nil, "revision_id": nil, "tenant_id": nil},
	})
}
