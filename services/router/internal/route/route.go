package route

import (
	"encoding/json"
	"net/url"
	"strings"
)

// RPCPath is the A2A JSON-RPC endpoint, whose owner is in the body rather than the path.
const RPCPath = "/a2a"

// Path returns the ID in a request path that names its owner, or "" when the path carries none.
// rpc is true for the A2A JSON-RPC endpoints (the default agent's /a2a and an agent's
// /a2a/{agent}), whose ID is in the body (JSONRPC).
func Path(path string) (id string, rpc bool) {
	if path == RPCPath {
		return "", true
	}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(seg) == 2 && seg[0] == "a2a" && seg[1] != "" && seg[1] != "rest":
		// An agent's JSON-RPC endpoint, /a2a/{agent}: its owner is in the body too.
		return "", true
	case len(seg) >= 3 && seg[0] == "v1" && (seg[1] == "sessions" || seg[1] == "turns" || seg[1] == "chat"):
		// /v1/sessions/{session_id}/..., /v1/turns/{turn_id}/..., /v1/chat/{chat_id}/...
		return seg[2], false
	case len(seg) >= 5 && seg[0] == "v1" && seg[1] == "agents" && seg[3] == "chat":
		// An agent's chat: /v1/agents/{name}/chat/{chat_id}/...
		return seg[4], false
	case len(seg) >= 2 && seg[0] == "threads":
		// /threads/{thread_id}/...; its runs live where the thread does.
		return seg[1], false
	}
	if rest := restRoute(seg); len(rest) >= 2 && rest[0] == "tasks" {
		// The A2A HTTP+JSON binding's task routes: /tasks/{id}, /tasks/{id}:cancel,
		// /tasks/{id}:subscribe, /tasks/{id}/pushNotificationConfigs[/{configId}].
		id, _, _ := strings.Cut(rest[1], ":")
		if u, err := url.PathUnescape(id); err == nil {
			return u, false
		}
	}
	return "", false
}

// restRoute is the route under the A2A HTTP+JSON binding's base (/a2a/rest, or an agent's
// /a2a/{agent}/rest) as segments, nil for a path outside it.
func restRoute(seg []string) []string {
	switch {
	case len(seg) >= 3 && seg[0] == "a2a" && seg[1] == "rest":
		return seg[2:]
	case len(seg) >= 4 && seg[0] == "a2a" && seg[2] == "rest":
		return seg[3:]
	}
	return nil
}

// RESTMessage reports whether path is a message route of the A2A HTTP+JSON binding
// (message:send, message:stream), whose owner is in the body (RESTBody).
func RESTMessage(path string) bool {
	rest := restRoute(strings.Split(strings.TrimPrefix(path, "/"), "/"))
	return len(rest) == 1 && (rest[0] == "message:send" || rest[0] == "message:stream")
}

// RESTBody returns the ID a REST message's body (a 1.0 SendMessageRequest) names: the
// message's taskId, else its contextId; "" for new work or a body that is not one.
func RESTBody(body []byte) string {
	var p rpcParams
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.owner()
}

// rpcParams are the params members that name a task's or context's owner, across the A2A methods
// of both versions: 0.3's tasks/get, tasks/cancel, tasks/resubscribe and pushNotificationConfig
// get, list and delete take id, its pushNotificationConfig/set taskId; 1.0's GetTask, CancelTask
// and SubscribeToTask take id, its push config methods taskId (their id is the config's), and
// ListTasks contextId; message/send and message/stream (SendMessage, SendStreamingMessage) carry
// the message's taskId and contextId.
type rpcParams struct {
	ID        string `json:"id"`
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	Message   *struct {
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	} `json:"message"`
}

// owner is the first ID the params name, task before context: taskId before id, as a 1.0 push
// config method's id names the config, not the task.
func (p rpcParams) owner() string {
	for _, id := range []string{p.TaskID, p.ID} {
		if id != "" {
			return id
		}
	}
	if p.Message != nil {
		if p.Message.TaskID != "" {
			return p.Message.TaskID
		}
		if p.Message.ContextID != "" {
			return p.Message.ContextID
		}
	}
	return p.ContextID
}

// JSONRPC returns the ID a JSON-RPC request (or the first member of a batch that names one)
// carries in its params, "" for new work or a body that is not JSON-RPC (the owning region
// answers that with its own error), and the request's own id, for an error the router answers
// itself (nil for a batch or a body without one).
func JSONRPC(body []byte) (owner string, requestID json.RawMessage) {
	type request struct {
		ID     json.RawMessage `json:"id"`
		Params rpcParams       `json:"params"`
	}
	var one request
	if err := json.Unmarshal(body, &one); err == nil {
		return one.Params.owner(), one.ID
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(body, &batch); err != nil {
		return "", nil
	}
	for _, raw := range batch {
		var r request
		if json.Unmarshal(raw, &r) == nil {
			if id := r.Params.owner(); id != "" {
				return id, nil
			}
		}
	}
	return "", nil
}
