package route

import (
	"encoding/json"
	"strings"
)

// RPCPath is the A2A JSON-RPC endpoint, whose owner is in the body rather than the path.
const RPCPath = "/a2a"

// Path returns the ID in a request path that names its owner, or "" when the path carries none.
// rpc is true for the A2A JSON-RPC endpoint, whose ID is in the body (JSONRPC).
func Path(path string) (id string, rpc bool) {
	if path == RPCPath {
		return "", true
	}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(seg) >= 3 && seg[0] == "v1" && (seg[1] == "sessions" || seg[1] == "turns" || seg[1] == "chat"):
		// /v1/sessions/{session_id}/..., /v1/turns/{turn_id}/..., /v1/chat/{chat_id}/...
		return seg[2], false
	case len(seg) >= 2 && seg[0] == "threads":
		// /threads/{thread_id}/...; its runs live where the thread does.
		return seg[1], false
	}
	return "", false
}

// rpcParams are the params members that name a task's or context's owner, across the A2A methods:
// tasks/get, tasks/cancel, tasks/resubscribe and the pushNotificationConfig get, list and delete
// take id; pushNotificationConfig/set takes taskId; message/send and message/stream carry the
// message's taskId and contextId.
type rpcParams struct {
	ID      string `json:"id"`
	TaskID  string `json:"taskId"`
	Message *struct {
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	} `json:"message"`
}

// owner is the first ID the params name, task before context.
func (p rpcParams) owner() string {
	for _, id := range []string{p.ID, p.TaskID} {
		if id != "" {
			return id
		}
	}
	if p.Message != nil {
		if p.Message.TaskID != "" {
			return p.Message.TaskID
		}
		return p.Message.ContextID
	}
	return ""
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
