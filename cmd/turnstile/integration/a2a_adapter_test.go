package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// cardProxy stands in front of a turnstile's A2A front door: it records each JSON-RPC request's
// A2A-Version and method, and with only03 serves the door's Agent Card without its 1.0
// interfaces, as an agent of protocol 0.3 publishes it.
type cardProxy struct {
	next   http.Handler
	up     string
	only03 bool

	mu   sync.Mutex
	seen []string // "<A2A-Version> <method>"
}

func (p *cardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/.well-known/agent-card.json" && p.only03 {
		resp, err := http.Get(p.up + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var card map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var keep []any
		for _, i := range card["supportedInterfaces"].([]any) {
			if i.(map[string]any)["protocolVersion"] != "1.0" {
				keep = append(keep, i)
			}
		}
		card["supportedInterfaces"] = keep
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
		return
	}
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		p.mu.Lock()
		p.seen = append(p.seen, strings.TrimSpace(r.Header.Get("A2A-Version")+" "+req.Method))
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.next.ServeHTTP(w, r)
}

func (p *cardProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestA2AAdapterSpeaksTheCardsVersion: a turnstile whose agent is another turnstile's A2A front
// door (TURNSTILE_AGENT=a2a) runs its turns there in protocol 1.0, as that door's card offers 1.0
// over JSON-RPC: SendStreamingMessage with A2A-Version 1.0, the answer relayed whole and the
// upstream's task in the turn's session. Behind a card that lists only 0.3, the same door is
// spoken to in 0.3 (message/stream, no version) with the same answer.
func TestA2AAdapterSpeaksTheCardsVersion(t *testing.T) {
	t.Parallel()
	upEnv := testenv.New(t, testenv.Options{})
	up := "http://" + startStack(t, upEnv, "intake,worker,gateway,a2a").Addr()
	target, err := url.Parse(up)
	require.NoError(t, err)

	for _, c := range []struct {
		name   string
		only03 bool
		want   string
	}{
		{"V10", false, "1.0 SendStreamingMessage"},
		{"V03", true, "message/stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := httputil.NewSingleHostReverseProxy(target)
			rp.FlushInterval = -1
			proxy := &cardProxy{next: rp, up: up, only03: c.only03}
			srv := httptest.NewServer(proxy)
			t.Cleanup(srv.Close)

			env := testenv.New(t, testenv.Options{})
			env.Config.Agent = "a2a"
			env.Config.Agents.A2AURL = srv.URL + "/a2a"
			base := "http://" + startStack(t, env, "intake,worker,gateway").Addr()
			session := "adapter-" + c.name + "-" + testenv.RandomHex(4)
			status, b := post(t, base, session, `{"input":{"text":"hello upstream"},"metadata":{"demo":{"tokens":4}}}`, nil)
			require.Equal(t, http.StatusAccepted, status, string(b))
			var acc accepted
			require.NoError(t, json.Unmarshal(b, &acc))
			waitStatus(t, base, acc.TurnID, "succeeded")
			var done struct {
				Output struct {
					Text string `json:"text"`
				} `json:"output"`
			}
			require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+acc.TurnID, &done))
			require.NotEmpty(t, done.Output.Text)
			require.Equal(t, []string{c.want}, proxy.requests(), "one request per attempt, in the card's version")

			// The upstream ran the turn as a task of the session (contextId), with the answer the
			// downstream turn relayed.
			status, body := doJSON(t, http.MethodPost, up+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"`+session+`","includeArtifacts":true}}`,
				map[string]string{"Content-Type": "application/json", "A2A-Version": "1.0"})
			require.Equal(t, http.StatusOK, status, string(body))
			var out struct {
				Result json.RawMessage `json:"result"`
			}
			require.NoError(t, json.Unmarshal(body, &out), string(body))
			var page a2apb.ListTasksResponse
			require.NoError(t, a2apb.UnmarshalJSON(out.Result, &page), string(body))
			require.Len(t, page.GetTasks(), 1)
			task := page.GetTasks()[0]
			require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, task.GetStatus().GetState())
			var text string
			for _, a := range task.GetArtifacts() {
				for _, p := range a.GetParts() {
					text += p.GetText()
				}
			}
			require.Equal(t, text, done.Output.Text)
		})
	}
}

// doJSON sends one request with headers and returns the answer's status and body.
func doJSON(t *testing.T, method, url, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}
