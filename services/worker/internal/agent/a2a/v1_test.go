package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/a2a"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// upstreamOf serves the remote agent h in protocol: its Agent Card at the well-known path (0.3:
// a2a-go's card, naming the JSON-RPC URL; 1.0: a card whose supportedInterfaces list JSON-RPC at
// 1.0 before 0.3, as turnstile's own front door publishes), and its JSON-RPC endpoint at every
// other path (0.3: a2a-go's transport; 1.0: v1Endpoint).
func upstreamOf(t *testing.T, h a2asrv.RequestHandler, protocol string) http.Handler {
	t.Helper()
	var rpc http.Handler
	switch protocol {
	case a2a.Protocol03:
		rpc = a2asrv.NewJSONRPCHandler(h)
	case a2a.Protocol10:
		rpc = v1Endpoint(t, h)
	default:
		t.Fatalf("protocol %q", protocol)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
		url := "http://" + r.Host + "/"
		var card any = &sdk.AgentCard{Name: "remote", URL: url, PreferredTransport: sdk.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0"}
		if protocol == a2a.Protocol10 {
			card = map[string]any{"name": "remote", "url": url, "protocolVersion": "0.3.0", "supportedInterfaces": []map[string]string{
				{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
				{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
			}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
	mux.Handle("/", rpc)
	return mux
}

// v1Endpoint is a protocol 1.0 JSON-RPC endpoint over a2a-go's request handler h, as turnstile's
// front door serves 1.0 over its own 0.3 handler: requests and answers in the proto JSON mapping
// of package a2apb, 0.3's events turned into 1.0's by package a2atask. A request that does not
// name A2A-Version 1.0, or a 0.3 method, fails the test.
func v1Endpoint(t *testing.T, h a2asrv.RequestHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer := func(member string, v []byte) []byte {
			return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%q:%s}`, req.ID, member, v))
		}
		fail := func(code int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer("error", []byte(fmt.Sprintf(`{"code":%d,"message":%q}`, code, msg))))
		}
		if v := r.Header.Get(a2a.VersionHeader); v != "1.0" {
			t.Errorf("a request to the 1.0 agent named A2A-Version %q (method %s)", v, req.Method)
			fail(-32009, "version not supported")
			return
		}
		ctx := r.Context()
		switch req.Method {
		case "SendStreamingMessage":
			var in a2apb.SendMessageRequest
			if err := a2apb.UnmarshalJSON(req.Params, &in); err != nil {
				fail(-32602, err.Error())
				return
			}
			msg, err := a2atask.FromV1Message(in.GetMessage())
			if err != nil || msg == nil {
				fail(-32602, fmt.Sprint("message: ", err))
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			for ev, err := range h.OnSendMessageStream(ctx, &sdk.MessageSendParams{Message: msg}) {
				var line []byte
				if err != nil {
					line = answer("error", []byte(fmt.Sprintf(`{"code":-32603,"message":%q}`, err.Error())))
				} else {
					sr, err := a2atask.V1Event(ev)
					require.NoError(t, err)
					p, err := a2apb.MarshalJSON(sr)
					require.NoError(t, err)
					line = answer("result", p)
				}
				if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", time.Now().UnixNano(), line); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		case "CancelTask":
			var in a2apb.CancelTaskRequest
			if err := a2apb.UnmarshalJSON(req.Params, &in); err != nil {
				fail(-32602, err.Error())
				return
			}
			task, err := h.OnCancelTask(ctx, &sdk.TaskIDParams{ID: sdk.TaskID(in.GetId())})
			if err != nil {
				fail(-32001, err.Error())
				return
			}
			p, err := a2apb.MarshalJSON(a2atask.V1Task(task))
			require.NoError(t, err)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer("result", p))
		default:
			t.Errorf("the 1.0 agent was called with method %q", req.Method)
			fail(-32601, "method not found")
		}
	})
}

// bothVersions serves h with a card offering 1.0, and its JSON-RPC endpoint in the version each
// request names (none: 0.3), as turnstile's front door does.
func bothVersions(t *testing.T, h a2asrv.RequestHandler) http.Handler {
	v10, v03 := upstreamOf(t, h, a2a.Protocol10), a2asrv.NewJSONRPCHandler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(a2a.VersionHeader) == "" {
			v03.ServeHTTP(w, r)
			return
		}
		v10.ServeHTTP(w, r)
	})
}

// recording serves next and records each JSON-RPC request's method and A2A-Version.
type recording struct {
	next http.Handler
	mu   sync.Mutex
	seen []string // "<A2A-Version> <method>"
}

func (rc *recording) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		rc.mu.Lock()
		rc.seen = append(rc.seen, strings.TrimSpace(r.Header.Get(a2a.VersionHeader)+" "+req.Method))
		rc.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	rc.next.ServeHTTP(w, r)
}

func (rc *recording) requests() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.seen...)
}

// TestProtocolFromCard: the agent speaks 1.0 (A2A-Version 1.0, SendStreamingMessage) to an
// agent whose card offers 1.0 over JSON-RPC, and 0.3 (message/stream, no version) to one whose
// card does not or that has no card; a card that changes is followed once CardTTL has passed.
func TestProtocolFromCard(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, ag *a2a.Agent) {
		t.Helper()
		res, err := ag.Run(t.Context(), agenttest.NewTurn("hello", time.Minute), nil, &agenttest.Sink{})
		require.NoError(t, err)
		require.Equal(t, strings.Join(agenttest.Scenario{Tokens: 3}.Words(), ""), res.Text)
	}
	newAgent := func(t *testing.T, url string, ttl time.Duration) *a2a.Agent {
		ag, err := a2a.New(t.Context(), a2a.Config{URL: url, CardTTL: ttl})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ag.Close() })
		return ag
	}
	for _, c := range []struct {
		name, protocol string
		noCard         bool
		want           string
	}{
		{"CardOffers10", a2a.Protocol10, false, "1.0 SendStreamingMessage"},
		{"CardOffers03", a2a.Protocol03, false, "message/stream"},
		{"NoCard", a2a.Protocol03, true, "message/stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x := &executor{sc: agenttest.Scenario{Tokens: 3}, rec: &agenttest.Recorder{}, cancelled: make(chan sdk.TaskID, 1)}
			next := upstreamOf(t, a2asrv.NewHandler(x), c.protocol)
			if c.noCard {
				next = a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(x))
			}
			rec := &recording{next: next}
			srv := httptest.NewServer(rec)
			t.Cleanup(srv.Close)
			ag := newAgent(t, srv.URL, 0)
			run(t, ag)
			require.Equal(t, []string{c.want}, rec.requests())
			require.Equal(t, c.protocol, ag.Protocol(srv.URL))
		})
	}

	t.Run("CardChanges", func(t *testing.T) {
		t.Parallel()
		x := &executor{sc: agenttest.Scenario{Tokens: 3}, rec: &agenttest.Recorder{}, cancelled: make(chan sdk.TaskID, 1)}
		v03, v10 := upstreamOf(t, a2asrv.NewHandler(x), a2a.Protocol03), bothVersions(t, a2asrv.NewHandler(x))
		var mu sync.Mutex
		cur := v03
		rec := &recording{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			h := cur
			mu.Unlock()
			h.ServeHTTP(w, r)
		})}
		srv := httptest.NewServer(rec)
		t.Cleanup(srv.Close)
		const ttl = 50 * time.Millisecond
		ag := newAgent(t, srv.URL, ttl)
		run(t, ag)
		mu.Lock()
		cur = v10
		mu.Unlock()
		// Once the TTL has passed, the new card is read.
		eventually(t, func() bool {
			run(t, ag)
			return ag.Protocol(srv.URL) == a2a.Protocol10
		})
		got := rec.requests()
		require.Equal(t, "message/stream", got[0])
		require.Equal(t, "1.0 SendStreamingMessage", got[len(got)-1])
	})

	t.Run("CardUnavailable", func(t *testing.T) {
		t.Parallel()
		// A card answering 503 while the endpoint answers: that request goes in 0.3 (a request
		// naming no version is 0.3's), and the card is read again for the next one. The agent
		// speaks both, by A2A-Version, as turnstile's front door does.
		x := &executor{sc: agenttest.Scenario{Tokens: 3}, rec: &agenttest.Recorder{}, cancelled: make(chan sdk.TaskID, 1)}
		up := bothVersions(t, a2asrv.NewHandler(x))
		var mu sync.Mutex
		refusals := 1
		srv0 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			refuse := r.Method == http.MethodGet && refusals > 0
			if refuse {
				refusals--
			}
			mu.Unlock()
			if refuse {
				w.Header().Set("Retry-After", "0")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			up.ServeHTTP(w, r)
		})
		rec := &recording{next: srv0}
		srv := httptest.NewServer(rec)
		t.Cleanup(srv.Close)
		ag := newAgent(t, srv.URL, time.Hour)
		run(t, ag)
		require.Equal(t, a2a.Protocol03, ag.Protocol(srv.URL))
		run(t, ag)
		require.Equal(t, a2a.Protocol10, ag.Protocol(srv.URL))
		require.Equal(t, []string{"message/stream", "1.0 SendStreamingMessage"}, rec.requests())
	})
}

// eventually calls cond (which waits on its own: each call runs a turn) until it holds, for at
// most a minute.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
	}
}

// TestV1ErrorsAreTheSDKs: a 1.0 agent's JSON-RPC error reads as a2a-go's error of that code, so
// "task not found" is counted against the endpoint whichever version was spoken.
func TestV1ErrorsAreTheSDKs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"name":"x","supportedInterfaces":[{"url":"http://%s/","protocolBinding":"JSONRPC","protocolVersion":"1.0.1"}]}`, r.Host)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}`)
	}))
	t.Cleanup(srv.Close)
	ag, err := a2a.New(t.Context(), a2a.Config{URL: srv.URL, Guard: upstream.New(upstream.Config{Name: "test", Backoff: 10 * time.Millisecond})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = ag.Run(ctx, agenttest.NewTurn("hello", time.Minute), nil, &agenttest.Sink{})
	require.ErrorIs(t, err, sdk.ErrTaskNotFound)
	require.Equal(t, a2a.Protocol10, ag.Protocol(srv.URL), "1.0.1 is 1.0")
}
