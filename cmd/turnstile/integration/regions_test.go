package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// regionsRig is two full regions on one machine, euw1 and use1, each with its own Postgres
// schema, Redis key prefix, embedded broker and port and with TURNSTILE_REGION set, and one
// router in front of them, all in this process with authentication on. Three tenants:
//   - acme: home euw1, policy wait, its key only in euw1;
//   - initech: home euw1, policy failover, its key in both regions (imported into use1);
//   - globex: home use1, policy wait, its key only in use1.
type regionsRig struct {
	t      *testing.T
	envs   map[string]*testenv.Env
	cfgs   map[string]config.Config
	router string
	keys   map[string]string

	mu     sync.Mutex
	stacks map[string]*app.Stack
}

var regionCodes = []string{"euw1", "use1"}

func newRegionsRig(t *testing.T) *regionsRig {
	t.Helper()
	rig := &regionsRig{
		t: t, envs: map[string]*testenv.Env{}, cfgs: map[string]config.Config{},
		keys: map[string]string{}, stacks: map[string]*app.Stack{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs := map[string]string{}
	for _, code := range regionCodes {
		rig.envs[code] = testenv.New(t, testenv.Options{Partitions: 2})
		addrs[code] = testenv.FreeAddr(t)
	}
	keyIDs := map[string]string{}
	create := func(tenant, code string) {
		id, key, err := apikey.CreateIn(ctx, rig.envs[code].Pool, code, tenant)
		require.NoError(t, err)
		keyIDs[tenant], rig.keys[tenant] = id, key
	}
	create("acme", "euw1")
	create("initech", "euw1")
	create("globex", "use1")
	// The failover tenant's key works in use1 too (`turnstile apikey import`).
	_, err := apikey.Import(ctx, rig.envs["use1"].Pool, "initech", rig.keys["initech"])
	require.NoError(t, err)

	regionMap := fmt.Sprintf(`{"regions": [{"code": "euw1", "url": "http://%s"}, {"code": "use1", "url": "http://%s"}],
	  "default_home": "euw1",
	  "tenants": [{"name": "acme", "home": "euw1", "policy": "wait", "key_ids": [%q]},
	              {"name": "initech", "home": "euw1", "policy": "failover", "key_ids": [%q]},
	              {"name": "globex", "home": "use1", "key_ids": [%q]}]}`,
		addrs["euw1"], addrs["use1"], keyIDs["acme"], keyIDs["initech"], keyIDs["globex"])
	for _, code := range regionCodes {
		cfg := authConfig(rig.envs[code], "intake,worker,gateway,a2a")
		cfg.HTTPAddr = addrs[code]
		cfg.InstanceID = rig.envs[code].ID + "-" + code
		cfg.Region.Code, cfg.Region.Map = code, regionMap
		// A stopped region hands its running turns back at once rather than finishing them.
		cfg.DrainTimeout = 100 * time.Millisecond
		rig.cfgs[code] = cfg
		rig.start(code)
	}

	// The router needs no store: an environment of its own only gives it a config and a log.
	rcfg := config.Default()
	rcfg.Roles = "router"
	rcfg.HTTPAddr = "127.0.0.1:0"
	rcfg.Region.Map = regionMap
	rcfg.Router.ProbeInterval = 100 * time.Millisecond
	rcfg.Router.ProbeTimeout = 500 * time.Millisecond
	rcfg.Router.ConnectTimeout = 500 * time.Millisecond
	rcfg.Router.RetryAfter = time.Second
	rcfg.ShutdownTimeout = 10 * time.Second
	router := startStackCfg(t, rig.envs["euw1"], rcfg)
	rig.router = "http://" + router.Addr()
	return rig
}

// start starts (or restarts, on the same address and stores, as a new instance) a region.
func (rig *regionsRig) start(code string) {
	rig.t.Helper()
	cfg := rig.cfgs[code]
	rig.mu.Lock()
	if rig.stacks[code] != nil {
		cfg.InstanceID += "-restarted"
	}
	rig.mu.Unlock()
	st := startStackCfg(rig.t, rig.envs[code], cfg)
	rig.mu.Lock()
	rig.stacks[code] = st
	rig.mu.Unlock()
}

// stop stops a region: its HTTP port closes, its roles stop; its stores (and broker) remain, as a
// region's do when its compute is lost.
func (rig *regionsRig) stop(code string) {
	rig.t.Helper()
	rig.mu.Lock()
	st := rig.stacks[code]
	rig.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(rig.t, st.Stop(ctx))
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request through the router (or base) as tenant.
func (rig *regionsRig) call(base, method, path, tenant, body string) answer {
	rig.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
	require.NoError(rig.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tenant != "" {
		req.Header.Set("Authorization", "Bearer "+rig.keys[tenant])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(rig.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(rig.t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

type regionTurn struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	StreamToken string `json:"stream_token"`
	Status      string `json:"status"`
}

// postTurn posts a turn through the router as tenant.
func (rig *regionsRig) postTurn(tenant, session, text string, md map[string]any) regionTurn {
	rig.t.Helper()
	body := map[string]any{"input": map[string]string{"text": text}}
	if md != nil {
		body["metadata"] = md
	}
	b, err := json.Marshal(body)
	require.NoError(rig.t, err)
	a := rig.call(rig.router, http.MethodPost, "/v1/sessions/"+session+"/turns", tenant, string(b))
	require.Equal(rig.t, http.StatusAccepted, a.status, string(a.body))
	var rt regionTurn
	require.NoError(rig.t, json.Unmarshal(a.body, &rt))
	return rt
}

// stream opens a session's stream through the router with its stream token, as a browser's
// EventSource would (access_token), resuming after lastEventID when set.
func (rig *regionsRig) stream(session, token, query, lastEventID string) *testenv.SSEStream {
	rig.t.Helper()
	u := rig.router + "/v1/sessions/" + session + "/events?access_token=" + url.QueryEscape(token) + query
	s := testenv.OpenSSE(rig.t, u, lastEventID)
	require.Equal(rig.t, http.StatusOK, s.Resp.StatusCode)
	return s
}

// requireRegionUnavailable checks a 503 region-unavailable problem naming code.
func requireRegionUnavailable(t *testing.T, a answer, code string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, a.status, string(a.body))
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
	require.NotEmpty(t, a.header.Get("Retry-After"))
	var p map[string]any
	require.NoError(t, json.Unmarshal(a.body, &p))
	require.Equal(t, httpx.ProblemRegionUnavailable.URI(), p["type"])
	require.Equal(t, code, p[region.MemberRegion])
}

// ownerOf is the region an ID names.
func ownerOf(t *testing.T, id string) string {
	t.Helper()
	code, _, ok := region.Split(id)
	require.True(t, ok, "%q names no region", id)
	return code
}

// a2aClient is an official a2a-go client built from the Agent Card as the router serves it.
func (rig *regionsRig) a2aClient(tenant string) *a2aclient.Client {
	rig.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, rig.router, agentcard.WithRequestHeader("Authorization", "Bearer "+rig.keys[tenant]))
	require.NoError(rig.t, err)
	require.Equal(rig.t, rig.router+"/a2a", card.URL, "the card names the router, where the client came from")
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithInterceptors(a2aAuth{key: rig.keys[tenant]}))
	require.NoError(rig.t, err)
	rig.t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// TestRegionsThroughRouter: turns, streams and A2A calls sent to the router reach the region that
// owns them; a stream resumed through the router continues with no gap; another tenant's key
// still gets 404 from the owner.
func TestRegionsThroughRouter(t *testing.T) {
	t.Parallel()
	rig := newRegionsRig(t)

	// Each tenant's client-chosen session lands in its home region; the turn IDs say so.
	acme := rig.postTurn("acme", "acme-chat", "hello from acme", nil)
	require.Equal(t, "euw1", ownerOf(t, acme.TurnID))
	globex := rig.postTurn("globex", "globex-chat", "hello from globex", nil)
	require.Equal(t, "use1", ownerOf(t, globex.TurnID))

	// Streams through the router, with the stream token as EventSource sends it.
	evs := rig.stream("globex-chat", globex.StreamToken, "&turn_id="+url.QueryEscape(globex.TurnID), "").
		Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
	require.Equal(t, expectedEvents(globex.TurnID, "hello from globex"), describe(t, evs))

	// Resume through the router: read part of acme's stream, drop it, resume from the last ID.
	first := rig.stream("acme-chat", acme.StreamToken, "", "")
	head := first.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.delta" })
	first.Close()
	rest := rig.stream("acme-chat", acme.StreamToken, "", head[len(head)-1].ID).
		Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
	require.Equal(t, expectedEvents(acme.TurnID, "hello from acme"), describe(t, append(head, rest...)), "no gap, no repeat")

	// Status by turn ID reaches the owner whatever tenant's key asks; another tenant gets 404.
	require.Equal(t, http.StatusOK, rig.call(rig.router, http.MethodGet, "/v1/turns/"+globex.TurnID, "globex", "").status)
	require.Equal(t, http.StatusOK, rig.call(rig.router, http.MethodGet, "/v1/turns/"+acme.TurnID, "acme", "").status)
	other := rig.call(rig.router, http.MethodGet, "/v1/turns/"+acme.TurnID, "initech", "")
	require.Equal(t, http.StatusNotFound, other.status, "initech's key works in euw1 but acme's turn is not its: %s", other.body)

	// A2A through the router with the official client: the task is minted in acme's home and
	// every follow-up reaches it.
	c := rig.a2aClient("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("hi over a2a", nil)}))
	require.Equal(t, "euw1", ownerOf(t, string(task.ID)))
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
	gtask := taskResult(t)(rig.a2aClient("globex").SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("hi from globex", nil)}))
	require.Equal(t, "use1", ownerOf(t, string(gtask.ID)))
	_, err = rig.a2aClient("initech").GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound, "initech reaches the region of acme's task, which does not show it to initech")

	// A2A 1.0's HTTP+JSON binding through the router: a task route names its task in the path,
	// a message route in the body, and both reach the task's region whoever asks (another
	// tenant's home region would answer 421 misdirected).
	viaREST := rig.call(rig.router, http.MethodGet, "/a2a/rest/tasks/"+string(task.ID), "acme", "")
	require.Equal(t, http.StatusOK, viaREST.status, string(viaREST.body))
	require.Contains(t, string(viaREST.body), `"id":"`+string(task.ID)+`"`)
	// initech's home is euw1; globex's task lives in use1, where initech's key works too.
	viaREST = rig.call(rig.router, http.MethodGet, "/a2a/rest/tasks/"+string(gtask.ID), "initech", "")
	require.Equal(t, http.StatusNotFound, viaREST.status, "initech reaches use1, where globex's task is not its: %s", viaREST.body)
	viaREST = rig.call(rig.router, http.MethodPost, "/a2a/rest/message:send", "initech",
		`{"message":{"messageId":"m-`+testenv.RandomHex(4)+`","taskId":"`+string(gtask.ID)+`","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	require.Equal(t, http.StatusNotFound, viaREST.status, "initech's follow-up reaches use1, where the task is not its: %s", viaREST.body)
	viaREST = rig.call(rig.router, http.MethodPost, "/a2a/rest/tasks/"+string(gtask.ID)+":cancel", "initech", "")
	require.Equal(t, http.StatusNotFound, viaREST.status, "a cancel reaches use1 too: %s", viaREST.body)

	// An agent's own JSON-RPC endpoint (/a2a/{agent}; the default agent is named "agent") is routed
	// by the task its body names, as /a2a is.
	byAgent := rig.call(rig.router, http.MethodPost, "/a2a/agent", "acme",
		`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"`+string(task.ID)+`"}}`)
	require.Equal(t, http.StatusOK, byAgent.status, string(byAgent.body))
	require.Contains(t, string(byAgent.body), `"id":"`+string(task.ID)+`"`)
	byAgent = rig.call(rig.router, http.MethodPost, "/a2a/agent", "initech",
		`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"`+string(gtask.ID)+`"}}`)
	require.Contains(t, string(byAgent.body), `"code":-32001`, "initech's tasks/get reaches use1, where globex's task is not its: %s", byAgent.body)
}

// TestRegionDownAndBack stops euw1 with a turn running and one queued behind it: its sessions
// answer 503 naming it within a bound, a failover tenant's new work runs in use1 meanwhile, and
// when euw1 returns its queued turns run and its clients resume their streams through the router.
func TestRegionDownAndBack(t *testing.T) {
	t.Parallel()
	rig := newRegionsRig(t)

	running := rig.postTurn("acme", "acme-down", "first", demoMeta(3000))
	queued := rig.postTurn("acme", "acme-down", "second", nil)
	earlier := rig.postTurn("initech", "initech-old", "before the outage", nil)
	stream := rig.stream("acme-down", running.StreamToken, "", "")
	head := stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.delta" })

	rig.stop("euw1")
	stream.Ended(t, 30*time.Second)

	// The first request after the stop finds the port closed; later ones are answered from the
	// router's health state without dialling.
	var worst time.Duration
	for i := range 5 {
		start := time.Now()
		a := rig.call(rig.router, http.MethodGet, "/v1/turns/"+queued.TurnID, "acme", "")
		took := time.Since(start)
		worst = max(worst, took)
		requireRegionUnavailable(t, a, "euw1")
		t.Logf("503 naming euw1, request %d: %v", i+1, took)
	}
	require.Less(t, worst, time.Second, "an owner that is down is answered within the bound")
	requireRegionUnavailable(t, rig.call(rig.router, http.MethodPost, "/v1/sessions/acme-down/turns", "acme", `{"input":{"text":"x"}}`), "euw1")
	requireRegionUnavailable(t, rig.call(rig.router, http.MethodPost, "/v1/sessions", "acme", `{}`), "euw1")
	requireRegionUnavailable(t, rig.call(rig.router, http.MethodGet, "/v1/turns/"+earlier.TurnID, "initech", ""), "euw1")

	// initech's policy is failover: its new session is minted in use1 and its turn runs there.
	a := rig.call(rig.router, http.MethodPost, "/v1/sessions", "initech", `{}`)
	require.True(t, a.status == http.StatusCreated || a.status == http.StatusOK, "%d %s", a.status, a.body)
	var sess struct {
		SessionID string `json:"session_id"`
	}
	require.NoError(t, json.Unmarshal(a.body, &sess))
	require.Equal(t, "use1", ownerOf(t, sess.SessionID))
	moved := rig.postTurn("initech", sess.SessionID, "during the outage", nil)
	require.Equal(t, "use1", ownerOf(t, moved.TurnID))
	evs := rig.stream(sess.SessionID, moved.StreamToken, "&turn_id="+url.QueryEscape(moved.TurnID), "").
		Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.completed" })
	require.Equal(t, expectedEvents(moved.TurnID, "during the outage"), describe(t, evs))
	// ... and over A2A, with the official client: a message without a task is new work too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := taskResult(t)(rig.a2aClient("initech").SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("a2a in the outage", nil)}))
	require.Equal(t, "use1", ownerOf(t, string(task.ID)))
	// The router's metrics say so too.
	metrics := rig.call(rig.router, http.MethodGet, "/metrics", "", "")
	require.Contains(t, string(metrics.body), `turnstile_router_region_up{region="euw1"} 0`)
	require.Contains(t, string(metrics.body), `turnstile_router_forwards_total{outcome="failover",region="use1"}`)
	require.Contains(t, string(metrics.body), `turnstile_router_forwards_total{outcome="unavailable",region="euw1"}`)
	// An A2A follow-up naming euw1 is refused as JSON-RPC, HTTP 503 kept.
	rpc := rig.call(rig.router, http.MethodPost, "/a2a", "initech",
		`{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"euw1-0192f3c4-0000-7000-8000-000000000000"}}`)
	require.Equal(t, http.StatusServiceUnavailable, rpc.status)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":9,"error":{"code":-32050,"message":"region euw1 is unavailable; retry later","data":{"region":"euw1"}}}`, string(rpc.body))

	// euw1 returns: once the router's probes see it ready, its queued turns run and the client
	// resumes its stream from where it was cut, through the router, with no gap.
	rig.start("euw1")
	testenv.WaitFor(t, 30*time.Second, "the router to see euw1 back", func() bool {
		return rig.call(rig.router, http.MethodGet, "/v1/turns/"+queued.TurnID, "acme", "").status == http.StatusOK
	})
	rest := rig.stream("acme-down", running.StreamToken, "", head[len(head)-1].ID).
		Until(t, 60*time.Second, func(e testenv.Event) bool {
			return e.Type == "turn.completed" && strings.Contains(e.Data, queued.TurnID)
		})
	resumed := append(slices.Clone(head), rest...)
	whole := rig.stream("acme-down", running.StreamToken, "", "").
		Until(t, 30*time.Second, func(e testenv.Event) bool {
			return e.Type == "turn.completed" && strings.Contains(e.Data, queued.TurnID)
		})
	ids := func(evs []testenv.Event) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = e.ID + " " + e.Type
		}
		return out
	}
	require.Equal(t, ids(whole), ids(resumed), "the resumed stream is the session's whole stream: no gap, no repeat")
	require.Contains(t, describe(t, resumed), "turn.completed "+running.TurnID, "the interrupted turn ran to its end")
	require.Equal(t, http.StatusOK, rig.call(rig.router, http.MethodGet, "/v1/turns/"+earlier.TurnID, "initech", "").status)
}
