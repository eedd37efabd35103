package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// dashboardMetrics is every turnstile metric family the Grafana dashboard the chart ships queries
// (a histogram's _bucket, _sum and _count series name their family).
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/helm/turnstile/dashboards/turnstile.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	seen := map[string]bool{}
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			for _, name := range regexp.MustCompile(`turnstile_[a-z0-9_]+`).FindAllString(target.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					name = strings.TrimSuffix(name, suffix)
				}
				seen[name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// exposedFamilies scrapes url and returns the turnstile metric families it serves.
func exposedFamilies(t *testing.T, url string, into map[string]bool) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok && strings.HasPrefix(name, "turnstile_") {
			into[strings.Fields(name)[0]] = true
		}
	}
	require.NoError(t, sc.Err())
}

// TestDashboardMetricsServed runs a stack of every role and a router in front of it through the
// work the dashboard's panels watch (turns, a poison turn dead-lettered after its retries, a
// stream resumed with Last-Event-ID, a request through the router, the agent's replica registered
// in the registry and found there by the worker, the registry's sweeps), then requires every metric
// the dashboard queries to be served on /metrics: a renamed or removed metric fails here, not on
// an operator's empty panel.
func TestDashboardMetricsServed(t *testing.T) {
	t.Parallel()
	// The worker's http agent over a pool of one replica, which it finds in the registry (the
	// stack's own intake), so the upstream and registry panels have series; the replica refuses
	// the poison turn's input for good.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("poison")) {
			http.Error(w, "this input is refused", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"hello"}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	t.Cleanup(agent.Close)
	env := testenv.New(t, testenv.Options{Partitions: 2})
	env.Config.MaxAttempts = 2
	env.Config.Agent = "http"
	env.Config.Agents.AgentEndpoints = "registry"
	env.Config.HTTPAddr = testenv.FreeAddr(t)
	env.Config.Registry.URL = "http://" + env.Config.HTTPAddr
	env.Config.Registry.SweepInterval = 100 * time.Millisecond
	stack := startStack(t, env, "intake,worker,gateway,a2a,aisdk,langgraph,notifier")
	base := "http://" + stack.Addr()
	reg, err := http.Post(base+"/v1/agents/agent/instances", "application/json",
		strings.NewReader(fmt.Sprintf(`{"instance_id":"agent-0","endpoint":%q}`, agent.URL+"/agent")))
	require.NoError(t, err)
	regBody, _ := io.ReadAll(reg.Body)
	require.NoError(t, reg.Body.Close())
	require.Equal(t, http.StatusCreated, reg.StatusCode, string(regBody))
	testenv.WaitFor(t, 60*time.Second, "the worker's registry snapshot to hold the replica", func() bool {
		v, ok := metricValue(t, base, "turnstile_registry_snapshot_endpoints", `agent="agent"`)
		return ok && v == 1
	})

	rcfg := config.Default()
	rcfg.Roles = "router"
	rcfg.HTTPAddr = "127.0.0.1:0"
	rcfg.Region.Map = fmt.Sprintf(`{"regions": [{"code": "euw1", "url": %q}], "default_home": "euw1"}`, base)
	rcfg.Router.ProbeInterval = 100 * time.Millisecond
	rcfg.ShutdownTimeout = 10 * time.Second
	router := "http://" + startStackCfg(t, env, rcfg).Addr()

	postTurn(t, router, "dash", "through the router")
	poison := postTurnWith(t, base, "dash-poison", map[string]any{"input": map[string]string{"text": "poison"}})
	s := testenv.OpenSSE(t, base+"/v1/sessions/dash/events", "")
	first, ok := s.Next(t, 30*time.Second)
	require.True(t, ok, "the session's stream ended before its first event")
	s.Close()
	resumed := testenv.OpenSSE(t, base+"/v1/sessions/dash/events", first.ID)
	resumed.Until(t, 30*time.Second, countCompleted(1))
	resumed.Close()
	waitTerminalEvents(t, env, "dash-poison", poison)
	testenv.WaitFor(t, 30*time.Second, "a sweep to count the live registration", func() bool {
		v, ok := metricValue(t, base, "turnstile_registry_instances", `state="live"`)
		return ok && v == 1
	})

	exposed := map[string]bool{}
	exposedFamilies(t, base+"/metrics", exposed)
	exposedFamilies(t, router+"/metrics", exposed)
	var missing []string
	for _, name := range dashboardMetrics(t) {
		if !exposed[name] {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "the dashboard queries metrics the stack does not serve")
}
