package agents_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
)

const twoAgents = `
default: support
agents:
  - name: support
    version: "3"
    adapter: demo
    limits: {in_flight: 32, default_deadline: 2m}
    card: {name: Support, description: Answers customers, skills: [{id: faq, name: FAQ}]}
  - name: research
    adapter: openai
    openai: {base_url: "http://127.0.0.1:9/v1", model: fake}
    limits: {upstream_initial: 2, upstream_max: 4, upstream_total: 4, max_attempts: 5}
    assistant: {graph_id: researcher, metadata: {team: science}}
`

func TestCatalog(t *testing.T) {
	t.Parallel()
	cfg := config.Default()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := agents.FromConfig(cfg)
		require.Equal(t, []string{agents.DefaultName}, c.Names())
		a, ok := c.Get("")
		require.True(t, ok)
		require.Equal(t, cfg.Agent, a.Adapter)
		require.Equal(t, cfg.MaxInflight, a.Limits.InFlight)
		require.Equal(t, cfg.MaxAttempts, a.Limits.MaxAttempts)
		require.Equal(t, cfg.DefaultDeadline, a.Limits.DefaultDeadline)
		require.Equal(t, "turns", c.Topic("turns", ""))
		require.Equal(t, "turns", c.Topic("turns", agents.DefaultName))
	})

	t.Run("TwoAgents", func(t *testing.T) {
		t.Parallel()
		c, err := agents.Parse([]byte(twoAgents), cfg)
		require.NoError(t, err)
		require.Equal(t, []string{"research", "support"}, c.Names())
		require.Equal(t, "support", c.Default)
		s, _ := c.Get("support")
		require.Equal(t, 32, s.Limits.InFlight)
		require.Equal(t, 2*time.Minute, s.Limits.DefaultDeadline)
		require.Equal(t, cfg.MaxAttempts, s.Limits.MaxAttempts, "left out: the variable's value")
		r, _ := c.Get("research")
		require.Equal(t, "fake", r.Settings.OpenAIModel)
		require.Equal(t, 4, r.Settings.UpstreamTotalLimit)
		require.Equal(t, 5, r.Limits.MaxAttempts)
		require.Equal(t, "researcher", r.GraphID())
		require.Equal(t, "turns", c.Topic("turns", "support"))
		require.Equal(t, "turns.research", c.Topic("turns", "research"))
		_, ok := c.Get("nobody")
		require.False(t, ok)
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		c, err := agents.Parse([]byte(`{"agents":[{"name":"a1","adapter":"demo"},{"name":"agent","adapter":"demo"}]}`), cfg)
		require.NoError(t, err)
		require.Equal(t, agents.DefaultName, c.Default, "the agent named agent is the default when none is named")
	})

	t.Run("EveryErrorNamed", func(t *testing.T) {
		t.Parallel()
		_, err := agents.Parse([]byte(`
default: ghost
agents:
  - name: a
    adapter: telepathy
  - name: a
    adapter: demo
  - name: r
    adapter: openai
    openai: {base_url: "http://x/v1"}
  - name: Bad_Name
    adapter: demo
    limits: {in_flight: 0, upstream_initial: 8, upstream_max: 4}
  - name: h
    adapter: http
    colour: blue
`), cfg)
		var fe *agents.Error
		require.True(t, errors.As(err, &fe), "%v", err)
		msg := err.Error()
		for _, want := range []string{
			"/agents/0/adapter", "telepathy", // unknown adapter
			`/agents/1/name: duplicate agent name "a"`,
			"/agents/2/openai: missing property 'model'",
			"/agents/3/name",                            // bad name
			"/agents/3/limits/in_flight",                // bad limit
			"/agents/3/limits/upstream_max",             // bound between two limits
			"/agents/4: missing property 'http'",        // http without url
			"/agents/4: additional properties 'colour'", // unknown field
			`/default: names no agent`,
		} {
			require.Contains(t, msg, want)
		}
		t.Logf("%d errors: %s", len(fe.Problems), msg)
	})

	t.Run("Diff", func(t *testing.T) {
		t.Parallel()
		a, err := agents.Parse([]byte(twoAgents), cfg)
		require.NoError(t, err)
		b, err := agents.Parse([]byte(`
default: support
agents:
  - name: support
    version: "4"
    adapter: demo
    limits: {in_flight: 16, default_deadline: 2m}
    card: {name: Support, description: Answers customers, skills: [{id: faq, name: FAQ}]}
  - name: billing
    adapter: demo
`), cfg)
		require.NoError(t, err)
		ch := agents.Diff(a, b)
		require.Equal(t, []string{"billing"}, ch.Added)
		require.Equal(t, []string{"research"}, ch.Removed)
		require.Equal(t, []string{"support: version", "support: limits.in_flight"}, ch.Live)
		require.Empty(t, ch.Restart)

		// What a running worker applies (limits, endpoints) and what waits for its restart.
		c, err := agents.Parse([]byte(strings.Replace(strings.Replace(twoAgents,
			`openai: {base_url: "http://127.0.0.1:9/v1", model: fake}`, `openai: {base_url: "http://127.0.0.1:10/v1", model: fake2}`, 1),
			`{upstream_initial: 2, upstream_max: 4, upstream_total: 4, max_attempts: 5}`, `{upstream_initial: 2, upstream_max: 8, upstream_total: 8, max_attempts: 3}`, 1)), cfg)
		require.NoError(t, err)
		ch = agents.Diff(a, c)
		require.Equal(t, []string{"research: limits.max_attempts", "research: limits.upstream_total", "research: endpoints"}, ch.Live)
		require.Equal(t, []string{"research: settings", "research: limits.upstream_initial/max"}, ch.Restart)

		// Moving to the registry's snapshot starts a follower: a restart.
		d, err := agents.Parse([]byte(strings.Replace(twoAgents,
			`openai: {base_url: "http://127.0.0.1:9/v1", model: fake}`, `openai: {model: fake}
    endpoints: [registry]`, 1)), cfg)
		require.NoError(t, err)
		ch = agents.Diff(a, d)
		require.Empty(t, ch.Live)
		require.Equal(t, []string{"research: endpoints"}, ch.Restart)
	})
}

func TestWatcher(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte(twoAgents), 0o600))
	cfg := config.Default()
	cfg.AgentsFile = path
	reg := prometheus.NewRegistry()
	w, err := agents.NewWatcher(cfg, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	require.Equal(t, []string{"research", "support"}, w.Catalog().Names())
	var changes []agents.Changes
	w.Subscribe(func(_, _ *agents.Catalog, ch agents.Changes) { changes = append(changes, ch) })

	t.Run("BadReloadKeepsLastGood", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, []byte("agents:\n  - name: x\n    adapter: nope\n"), 0o600))
		require.ErrorContains(t, w.Reload(), "/agents/0/adapter")
		require.Equal(t, []string{"research", "support"}, w.Catalog().Names())
		require.Equal(t, 1.0, testutil.ToFloat64(w.ReloadsMetric().WithLabelValues("invalid")))
		require.Empty(t, changes)
	})
	t.Run("GoodReloadApplies", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, []byte(twoAgents+"  - name: billing\n    adapter: demo\n"), 0o600))
		require.NoError(t, w.Reload())
		require.Equal(t, []string{"billing", "research", "support"}, w.Catalog().Names())
		require.Equal(t, 1.0, testutil.ToFloat64(w.ReloadsMetric().WithLabelValues("ok")))
		require.Len(t, changes, 1)
		require.Equal(t, []string{"billing"}, changes[0].Added)
	})
	t.Run("BadFileRefusedAtStart", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(bad, []byte(`{"agents":[{"name":"a","adapter":"demo"},{"name":"a","adapter":"x"}]}`), 0o600))
		c := cfg
		c.AgentsFile = bad
		_, err := agents.NewWatcher(c, slog.New(slog.DiscardHandler), nil)
		require.ErrorContains(t, err, "bad.json")
		require.ErrorContains(t, err, "duplicate agent name")
		require.ErrorContains(t, err, "/agents/1/adapter")
	})
	t.Run("StartStop", func(t *testing.T) {
		for range 3 {
			require.NoError(t, w.Start(t.Context()))
			require.NoError(t, w.Start(t.Context()))
			require.NoError(t, w.Stop(t.Context()))
			require.NoError(t, w.Stop(t.Context()))
		}
	})
}

// TestExampleFile keeps the example catalogs valid: examples/agents.yaml and the one
// make dev-agents runs (examples/agents-dev.yaml).
func TestExampleFile(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"agents.yaml", "agents-dev.yaml"} {
		c, err := agents.Load("../../examples/"+f, config.Default())
		require.NoError(t, err, f)
		require.Equal(t, []string{"research", "support"}, c.Names(), f)
	}
}
