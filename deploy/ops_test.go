package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite deploy/prometheus/alerts.yml from the chart's PrometheusRule")

const (
	dashboardPath = "helm/turnstile/dashboards/turnstile.json"
	alertsPath    = "prometheus/alerts.yml"
	runbookPath   = "../docs/RUNBOOK.md"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// metricRE finds the turnstile metric names a PromQL expression reads; a histogram's series
// (_bucket, _sum, _count) are named by their family.
var metricRE = regexp.MustCompile(`turnstile_[a-z0-9_]+`)

func familyOf(series string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(series, suffix); ok {
			return f
		}
	}
	return series
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../docs/METRICS.md")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(turnstile_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = true
	}
	return out
}

// TestDashboard parses the Grafana dashboard: every panel that is not a row queries at least one
// turnstile metric, each documented in docs/METRICS.md. (cmd/turnstile's integration tests check
// the same names against a running stack's /metrics.)
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	require.Equal(t, "turnstile", d.UID)
	documented := documentedMetrics(t)
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			names := metricRE.FindAllString(target.Expr, -1)
			require.NotEmpty(t, names, "panel %q: %q reads no turnstile metric", p.Title, target.Expr)
			for _, n := range names {
				f := familyOf(n)
				require.True(t, documented[f], "panel %q reads %s, which docs/METRICS.md does not list", p.Title, f)
				queried[f] = true
			}
		}
	}
	for _, must := range []string{
		"turnstile_intake_requests_total", "turnstile_backlog_age_seconds", "turnstile_worker_inflight_turns",
		"turnstile_worker_upstream_limit", "turnstile_worker_upstream_failures_total", "turnstile_streams_open",
		"turnstile_notifier_outbox_age_seconds", "turnstile_registry_instances", "turnstile_registry_requests_total",
		"turnstile_registry_snapshot_age_seconds",
	} {
		require.True(t, queried[must], "the dashboard has no panel on %s", must)
	}
}

// TestChartShipsDashboard renders the chart: the dashboard reaches a ConfigMap carrying the
// Grafana sidecar's label, byte for byte, and can be switched off.
func TestChartShipsDashboard(t *testing.T) {
	t.Parallel()
	r, err := render(t, nil)
	require.NoError(t, err)
	cm := r.find("ConfigMap", "ts-turnstile-dashboard")
	require.NotNil(t, cm)
	require.Equal(t, "1", get(cm, "metadata.labels").(map[string]any)["grafana_dashboard"])
	want, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	require.JSONEq(t, string(want), get(cm, "data").(map[string]any)["turnstile.json"].(string))

	r, err = render(t, map[string]any{"grafanaDashboard": map[string]any{"enabled": false}})
	require.NoError(t, err)
	require.Nil(t, r.find("ConfigMap", "ts-turnstile-dashboard"))
}

func chartRuleGroups(t *testing.T) []any {
	t.Helper()
	r, err := render(t, nil)
	require.NoError(t, err)
	groups, ok := get(r.find("PrometheusRule", "ts-turnstile"), "spec.groups").([]any)
	require.True(t, ok)
	return groups
}

// TestAlertsHaveRunbooks requires each alert of the chart to link a section of docs/RUNBOOK.md
// that exists, and each section to belong to an alert.
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(runbookPath)
	require.NoError(t, err)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	alerts := map[string]bool{}
	for _, g := range chartRuleGroups(t) {
		for _, rule := range get(g, "rules").([]any) {
			name := get(rule, "alert").(string)
			url, _ := get(rule, "annotations.runbook_url").(string)
			base, anchor, ok := strings.Cut(url, "#")
			require.True(t, ok, "%s: runbook_url %q has no section", name, url)
			require.True(t, strings.HasSuffix(base, "docs/RUNBOOK.md"), "%s: runbook_url %q", name, url)
			require.Equal(t, strings.ToLower(name), anchor, "%s links another alert's section", name)
			require.True(t, sections[anchor], "%s: docs/RUNBOOK.md has no section %q", name, anchor)
			alerts[anchor] = true
		}
	}
	require.NotEmpty(t, alerts)
	for s := range sections {
		require.True(t, alerts[s], "docs/RUNBOOK.md's section %q belongs to no alert", s)
	}
}

// TestComposeAlertRules requires docker compose's Prometheus to load the chart's alert rules, as
// the chart renders them with its default thresholds (`go test -run TestComposeAlertRules -update`
// rewrites the file), and to scrape every turnstile service of docker-compose.yml.
func TestComposeAlertRules(t *testing.T) {
	groups := chartRuleGroups(t)
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	want := "# The chart's alert rules (templates/prometheusrule.yaml) with its default thresholds, for docker\n" +
		"# compose's Prometheus. Generated: go test ./deploy -run TestComposeAlertRules -update\n" + string(out)
	if *update {
		require.NoError(t, os.WriteFile(alertsPath, []byte(want), 0o644))
	}
	got, err := os.ReadFile(alertsPath)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "deploy/prometheus/alerts.yml is stale: go test ./deploy -run TestComposeAlertRules -update")

	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile("prometheus/prometheus.yml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &prom))
	require.Equal(t, []string{"/etc/prometheus/alerts.yml"}, prom.RuleFiles)
	scraped := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				scraped[strings.Split(target, ":")[0]] = true
			}
		}
	}
	f := loadCompose(t)
	for name, svc := range f.Services {
		if svc.Build == nil || name == "migrate" {
			continue // infrastructure, or the one-shot migration job
		}
		require.True(t, scraped[name], "compose's Prometheus does not scrape %s", name)
	}
	mounted := strings.Join(f.Services["prometheus"].Volumes, "\n")
	require.Contains(t, mounted, "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml")
}
