package deploy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// object is one rendered Kubernetes manifest.
type object map[string]any

func (o object) kind() string { return o["kind"].(string) }
func (o object) name() string { return get(o, "metadata.name").(string) }

// get walks a dotted path of map keys and list indexes.
func get(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case object:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func num(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case int:
		return n
	case string:
		i, err := strconv.Atoi(n)
		require.NoError(t, err)
		return i
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}

type rendered struct {
	objects []object
}

func (r rendered) find(kind, name string) object {
	for _, o := range r.objects {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	return nil
}

func (r rendered) all(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// renderFiles renders the chart's templates as `helm install ts ./helm/turnstile -n prod` would
// with the given values, by file name.
func renderFiles(t *testing.T, values map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load("helm/turnstile")
	require.NoError(t, err)
	vals, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: "ts", Namespace: "prod", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	require.NoError(t, err)
	return engine.Render(ch, vals)
}

// render renders the chart and parses its manifests.
func render(t *testing.T, values map[string]any) (rendered, error) {
	t.Helper()
	files, err := renderFiles(t, values)
	if err != nil {
		return rendered{}, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out rendered
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(files[n]))
		for {
			var o map[string]any
			if err := dec.Decode(&o); err != nil {
				require.Equal(t, "EOF", err.Error(), "parse %s:\n%s", n, files[n])
				break
			}
			if o != nil {
				out.objects = append(out.objects, object(o))
			}
		}
	}
	return out, nil
}

func TestChartDefaults(t *testing.T) {
	t.Parallel()
	r, err := render(t, nil)
	require.NoError(t, err)

	kinds := map[string]int{}
	for _, o := range r.objects {
		kinds[o.kind()]++
	}
	require.Equal(t, map[string]int{
		"Deployment": 7, "Service": 7, "PodDisruptionBudget": 7, "ConfigMap": 2,
		"Secret": 2, "Job": 1, "Ingress": 1, "ScaledObject": 1, "HorizontalPodAutoscaler": 2, "PrometheusRule": 1,
	}, kinds)

	so := r.find("ScaledObject", "ts-turnstile-worker")
	require.NotNil(t, so)
	require.Equal(t, "ts-turnstile-worker", get(so, "spec.scaleTargetRef.name"))
	require.Equal(t, 1, num(t, get(so, "spec.minReplicaCount")))
	require.Equal(t, 12, num(t, get(so, "spec.maxReplicaCount")), "the ceiling defaults to the partition count")
	require.Equal(t, 300, num(t, get(so, "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds")))
	require.Equal(t, "metrics-api", get(so, "spec.triggers.0.type"))
	require.Equal(t, "http://ts-turnstile-intake.prod.svc:8080/v1/backlog", get(so, "spec.triggers.0.metadata.url"))
	require.Equal(t, "backlog_age_seconds", get(so, "spec.triggers.0.metadata.valueLocation"))
	require.Equal(t, "5", get(so, "spec.triggers.0.metadata.targetValue"))

	checkDeployments(t, r, 600, 30)

	ing := r.find("Ingress", "ts-turnstile")
	require.Equal(t, "/v1/sessions/[^/]+/events", get(ing, "spec.rules.0.http.paths.0.path"))
	require.Equal(t, "ts-turnstile-gateway", get(ing, "spec.rules.0.http.paths.0.backend.service.name"))
	require.Equal(t, "/v1", get(ing, "spec.rules.0.http.paths.1.path"))
	require.Equal(t, "ts-turnstile-intake", get(ing, "spec.rules.0.http.paths.1.backend.service.name"))
	require.Equal(t, "/v1/chat", get(ing, "spec.rules.0.http.paths.4.path"))
	require.Equal(t, "ts-turnstile-aisdk", get(ing, "spec.rules.0.http.paths.4.backend.service.name"))
	aisdkEnv := map[string]string{}
	for _, e := range get(r.find("Deployment", "ts-turnstile-aisdk"), "spec.template.spec.containers.0.env").([]any) {
		if v, ok := get(e, "value").(string); ok {
			aisdkEnv[get(e, "name").(string)] = v
		}
	}
	require.Equal(t, "http://ts-turnstile-intake:8080", aisdkEnv["TURNSTILE_INTAKE_URL"], "the AI SDK front door reaches intake through its service")
	require.Equal(t, "http://ts-turnstile-gateway:8080", aisdkEnv["TURNSTILE_GATEWAY_URL"])
	paths := get(ing, "spec.rules.0.http.paths").([]any)
	console := paths[len(paths)-1]
	require.Equal(t, "/console", get(console, "path"))
	require.Equal(t, "ts-turnstile-intake", get(console, "backend.service.name"), "intake serves the console beside the admin API")
	require.Equal(t, "/threads", get(ing, "spec.rules.0.http.paths.6.path"))
	require.Equal(t, "ts-turnstile-langgraph", get(ing, "spec.rules.0.http.paths.6.backend.service.name"))
	lg := get(r.find("Deployment", "ts-turnstile-langgraph"), "spec.template.spec.containers.0.env")
	require.Contains(t, fmt.Sprint(lg), "http://ts-turnstile-intake:8080", "the front door reaches intake through its service")

	job := r.find("Job", "ts-turnstile-migrate")
	require.Equal(t, "pre-install,pre-upgrade", get(job, "metadata.annotations").(map[string]any)["helm.sh/hook"])
	require.Equal(t, []any{"migrate"}, get(job, "spec.template.spec.containers.0.args"))

	hpaGateway := r.find("HorizontalPodAutoscaler", "ts-turnstile-gateway")
	require.Equal(t, "turnstile_gateway_connections", get(hpaGateway, "spec.metrics.0.pods.metric.name"))
	hpaIntake := r.find("HorizontalPodAutoscaler", "ts-turnstile-intake")
	require.Equal(t, "cpu", get(hpaIntake, "spec.metrics.0.resource.name"))

	alerts := map[string]string{}
	for _, rule := range get(r.find("PrometheusRule", "ts-turnstile"), "spec.groups.0.rules").([]any) {
		alerts[get(rule, "alert").(string)] = get(rule, "expr").(string)
	}
	require.Contains(t, alerts["TurnstileBacklogAgeHigh"], "turnstile_backlog_age_seconds")
	require.Contains(t, alerts["TurnstileBacklogSignalStale"], "turnstile_backlog_query_failures_total")
	require.Contains(t, alerts["TurnstileDeadLetters"], "turnstile_worker_dead_lettered_total")
	require.Contains(t, alerts["TurnstileRedriveOrphans"], "turnstile_intake_redrive_orphans_total")
	require.Contains(t, alerts["TurnstileRedriveFailing"], "turnstile_intake_redrive_failures_total")
	require.Contains(t, alerts["TurnstileTakeoverRateHigh"], "turnstile_worker_takeovers_total")
	require.Contains(t, alerts["TurnstileStreamResets"], `turnstile_gateway_resumes_total{result="reset"}`)
	require.Contains(t, alerts["TurnstileWorkerPublishRetries"], "turnstile_worker_publish_retries_total")
	require.Contains(t, alerts["TurnstileNotifierOutboxOld"], "turnstile_notifier_outbox_age_seconds")
	require.Contains(t, alerts["TurnstileRegionDown"], "turnstile_router_region_up")

	require.Nil(t, r.find("Deployment", "ts-turnstile-router"), "the router is rendered only when enabled")
	require.NotContains(t, get(r.find("ConfigMap", "ts-turnstile-config"), "data"), "TURNSTILE_REGIONS", "single-region by default")

	checkEnvironments(t, r)
}

// TestChartRouter renders one region of two with its router: the region map reaches every
// service through the config ConfigMap, and the router gets a Deployment, Service, PDB and an
// ingress host of its own that sends every path to it.
func TestChartRouter(t *testing.T) {
	t.Parallel()
	regionMap := map[string]any{
		"regions": []any{
			map[string]any{"code": "euw1", "url": "https://euw1.turnstile.example.com"},
			map[string]any{"code": "use1", "url": "https://use1.turnstile.example.com"},
		},
		"default_home": "euw1",
		"tenants":      []any{map[string]any{"name": "acme", "home": "use1", "policy": "failover"}},
	}
	r, err := render(t, map[string]any{
		"region": map[string]any{"code": "euw1", "map": regionMap},
		"router": map[string]any{"enabled": true, "ingress": map[string]any{"enabled": true, "host": "api.turnstile.example.com"}},
	})
	require.NoError(t, err)

	data := get(r.find("ConfigMap", "ts-turnstile-config"), "data").(map[string]any)
	require.Equal(t, "euw1", data["TURNSTILE_REGION"])
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(data["TURNSTILE_REGIONS"].(string)), &got))
	require.Equal(t, regionMap, got, "the map reaches the services as it was given")

	d := r.find("Deployment", "ts-turnstile-router")
	require.NotNil(t, d)
	c := get(d, "spec.template.spec.containers.0")
	require.True(t, strings.HasPrefix(get(c, "image").(string), "ghcr.io/turnstile-run/turnstile-router:"), get(c, "image"))
	require.Equal(t, "ts-turnstile-config", get(c, "envFrom.0.configMapRef.name"))
	require.Len(t, get(c, "envFrom"), 1, "the router reads no store, so it gets no secret")
	require.Equal(t, "/readyz", get(c, "readinessProbe.httpGet.path"))
	require.Greater(t, num(t, get(d, "spec.template.spec.terminationGracePeriodSeconds")), num(t, get(c, "lifecycle.preStop.sleep.seconds")))
	require.Equal(t, "router", get(r.find("Service", "ts-turnstile-router"), "spec.selector").(map[string]any)["app.kubernetes.io/component"])
	require.NotNil(t, r.find("PodDisruptionBudget", "ts-turnstile-router"))

	ing := r.find("Ingress", "ts-turnstile-router")
	require.Equal(t, "api.turnstile.example.com", get(ing, "spec.rules.0.host"))
	require.Equal(t, "/", get(ing, "spec.rules.0.http.paths.0.path"))
	require.Equal(t, "ts-turnstile-router", get(ing, "spec.rules.0.http.paths.0.backend.service.name"))
	require.NotNil(t, r.find("Ingress", "ts-turnstile"), "the region's own ingress (the map's URL) stays")

	checkEnvironments(t, r)

	_, err = render(t, map[string]any{"router": map[string]any{"enabled": true}})
	require.ErrorContains(t, err, "router.enabled needs region.map")
}

// checkDeployments asserts probes, preStop and grace periods of the Deployments.
func checkDeployments(t *testing.T, r rendered, longestTurn, drain int) {
	t.Helper()
	for _, svc := range []string{"intake", "worker", "gateway", "a2a", "aisdk", "langgraph", "notifier"} {
		d := r.find("Deployment", "ts-turnstile-"+svc)
		require.NotNil(t, d, svc)
		spec := get(d, "spec.template.spec")
		c := get(spec, "containers.0")
		require.Equal(t, "/readyz", get(c, "readinessProbe.httpGet.path"), svc)
		require.Equal(t, "/healthz", get(c, "livenessProbe.httpGet.path"), svc)
		require.Equal(t, "http", get(c, "readinessProbe.httpGet.port"), svc)
		preStop := num(t, get(c, "lifecycle.preStop.sleep.seconds"))
		require.Positive(t, preStop, "%s: preStop keeps the pod in the endpoints while load balancers catch up", svc)
		grace := num(t, get(spec, "terminationGracePeriodSeconds"))
		require.Greater(t, grace, preStop, svc)
		require.Equal(t, true, get(spec, "securityContext.runAsNonRoot"), svc)
		if svc == "a2a" {
			env := map[string]string{}
			for _, e := range get(c, "env").([]any) {
				if v, ok := get(e, "value").(string); ok {
					env[get(e, "name").(string)] = v
				}
			}
			require.Equal(t, "http://ts-turnstile-intake:8080", env["TURNSTILE_INTAKE_URL"], "the front door calls the intake service")
			require.Equal(t, "http://ts-turnstile-gateway:8080", env["TURNSTILE_GATEWAY_URL"], "and the gateway service")
		}
		if svc != "worker" {
			continue
		}
		require.GreaterOrEqual(t, grace, preStop+longestTurn+drain, "worker grace period must cover the longest turn plus drain")
		env := map[string]string{}
		for _, e := range get(c, "env").([]any) {
			if v, ok := get(e, "value").(string); ok {
				env[get(e, "name").(string)] = v
			}
		}
		drainTimeout, err := time.ParseDuration(env["TURNSTILE_DRAIN_TIMEOUT"])
		require.NoError(t, err)
		shutdown, err := time.ParseDuration(env["TURNSTILE_SHUTDOWN_TIMEOUT"])
		require.NoError(t, err)
		require.Equal(t, time.Duration(longestTurn)*time.Second, drainTimeout, "running turns may finish on SIGTERM")
		require.GreaterOrEqual(t, shutdown, drainTimeout+time.Duration(drain)*time.Second)
		require.LessOrEqual(t, shutdown, time.Duration(grace-preStop)*time.Second, "the process must finish before the kubelet kills it")
	}
}

func TestChartCustomValues(t *testing.T) {
	t.Parallel()
	r, err := render(t, map[string]any{
		"kafka": map[string]any{"partitions": 4},
		"worker": map[string]any{
			"longestTurnSeconds": 1800, "drainSeconds": 60, "preStopSleepSeconds": 10,
			"autoscaling": map[string]any{
				"minReplicas": 0, "maxReplicas": 4, "source": "prometheus",
				"targetBacklogAgeSeconds": 2, "scaleDownStabilizationSeconds": 900,
				"prometheus": map[string]any{"serverAddress": "http://prom:9090", "query": `max(turnstile_backlog_age_seconds{env="prod"})`},
			},
		},
		"secrets":        map[string]any{"existingSecret": "turnstile-prod"},
		"prometheusRule": map[string]any{"enabled": false},
		"ingress":        map[string]any{"enabled": false},
	})
	require.NoError(t, err)
	so := r.find("ScaledObject", "ts-turnstile-worker")
	require.Equal(t, 0, num(t, get(so, "spec.minReplicaCount")), "workers may scale to zero: the signal lives in intake")
	require.Equal(t, 4, num(t, get(so, "spec.maxReplicaCount")))
	require.Equal(t, 900, num(t, get(so, "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds")))
	require.Equal(t, "prometheus", get(so, "spec.triggers.0.type"))
	require.Equal(t, `max(turnstile_backlog_age_seconds{env="prod"})`, get(so, "spec.triggers.0.metadata.query"))
	require.Equal(t, "2", get(so, "spec.triggers.0.metadata.threshold"))
	checkDeployments(t, r, 1800, 60)
	require.Empty(t, r.all("PrometheusRule"))
	require.Empty(t, r.all("Ingress"))
	require.Empty(t, r.all("Secret"), "an existing Secret replaces the rendered ones")
	require.Equal(t, "turnstile-prod", get(r.find("Deployment", "ts-turnstile-worker"), "spec.template.spec.containers.0.envFrom.1.secretRef.name"))
}

func TestChartRefusesUnsafeValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"ceiling above partitions": {map[string]any{
			"kafka":  map[string]any{"partitions": 4},
			"worker": map[string]any{"autoscaling": map[string]any{"maxReplicas": 5}},
		}, "must not exceed kafka.partitions"},
		"grace shorter than a turn": {
			map[string]any{"worker": map[string]any{"terminationGracePeriodSeconds": 60}},
			"must be at least preStopSleepSeconds + longestTurnSeconds + drainSeconds",
		},
		"unknown scaler source": {
			map[string]any{"worker": map[string]any{"autoscaling": map[string]any{"source": "kafka-lag"}}},
			"must be metrics-api or prometheus",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, tc.values)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestChartSigningSecret: the rendered Secret signs with a random secret of its own (a fresh one per
// install), never the published development default, unless one is given.
func TestChartSigningSecret(t *testing.T) {
	t.Parallel()
	secretOf := func(values map[string]any) string {
		r, err := render(t, values)
		require.NoError(t, err)
		v, _ := get(r.find("Secret", "ts-turnstile-secrets"), "stringData").(map[string]any)["TURNSTILE_NOTIFIER_SIGNING_SECRET"].(string)
		return v
	}
	first, second := secretOf(nil), secretOf(nil)
	require.True(t, strings.HasPrefix(first, "whsec_"), first)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(first, "whsec_"))
	require.NoError(t, err, "whsec_ and base64, as the Standard Webhooks scheme reads it")
	require.GreaterOrEqual(t, len(key), 24)
	require.NotEqual(t, config.NotifierSigningSecretDefault, first)
	require.NotEqual(t, first, second, "each install gets its own")
	given := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a secret given in the values!!!!"))
	require.Equal(t, given, secretOf(map[string]any{"secrets": map[string]any{"TURNSTILE_NOTIFIER_SIGNING_SECRET": given}}))
}

// checkEnvironments assembles each Deployment's environment (ConfigMap, Secret, literal env) and
// checks every variable is documented and the whole passes pkg/config's validation.
func checkEnvironments(t *testing.T, r rendered) {
	t.Helper()
	base := map[string]string{}
	for k, v := range get(r.find("ConfigMap", "ts-turnstile-config"), "data").(map[string]any) {
		base[k] = v.(string)
	}
	for k, v := range get(r.find("Secret", "ts-turnstile-secrets"), "stringData").(map[string]any) {
		base[k] = v.(string)
	}
	for _, d := range r.all("Deployment") {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for _, e := range get(d, "spec.template.spec.containers.0.env").([]any) {
			v, _ := get(e, "value").(string)
			if v == "" {
				v = "from-the-pod" // valueFrom (the pod name)
			}
			env[get(e, "name").(string)] = v
		}
		checkEnv(t, d.name(), env)
	}
}

// TestChartLints runs `helm lint`'s checks (chart metadata, template syntax, rendered YAML and
// Kubernetes object shape) and allows no warning or error.
func TestChartLints(t *testing.T) {
	t.Parallel()
	kv, err := chartutil.ParseKubeVersion("v1.31.0")
	require.NoError(t, err)
	l := lint.AllWithKubeVersion("helm/turnstile", nil, "prod", kv)
	for _, m := range l.Messages {
		require.Less(t, m.Severity, support.WarningSev, "helm lint: %s", m.Error())
	}
}

// TestChartAuth: a default install enforces API keys with stream-token keys of its own (a fresh
// random one per install, valid for pkg/config), an explicit auth.enabled=false turns it off, keys
// given in the values are kept, and the install's notes say how to create the first key.
func TestChartAuth(t *testing.T) {
	t.Parallel()
	authOf := func(values map[string]any) (mode, keys string) {
		r, err := render(t, values)
		require.NoError(t, err)
		mode, _ = get(r.find("ConfigMap", "ts-turnstile-config"), "data.TURNSTILE_AUTH").(string)
		keys, _ = get(r.find("Secret", "ts-turnstile-secrets"), "stringData.TURNSTILE_STREAM_TOKEN_KEYS").(string)
		return mode, keys
	}
	mode, first := authOf(nil)
	require.Equal(t, "on", mode, "secure by default")
	parsed, err := config.AuthSettings{Mode: "on", StreamTokenKeys: first}.Keys()
	require.NoError(t, err)
	require.Len(t, parsed, 1)
	_, second := authOf(nil)
	require.NotEqual(t, first, second, "each install gets its own stream-token key")

	mode, _ = authOf(map[string]any{"auth": map[string]any{"enabled": false}})
	require.Equal(t, "off", mode, "turned off only by an explicit value")

	given := "k9:" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes or more"))
	_, keys := authOf(map[string]any{"secrets": map[string]any{"TURNSTILE_STREAM_TOKEN_KEYS": given}})
	require.Equal(t, given, keys)

	_, err = render(t, map[string]any{"config": map[string]any{"TURNSTILE_AUTH": "off"}})
	require.ErrorContains(t, err, "set auth.enabled")

	notes := func(values map[string]any) string {
		files, err := renderFiles(t, values)
		require.NoError(t, err)
		return files["turnstile/templates/NOTES.txt"]
	}
	require.Contains(t, notes(nil), "exec deploy/ts-turnstile-intake -- \\\n    turnstile-intake apikey create --tenant NAME")
	require.Contains(t, notes(map[string]any{"auth": map[string]any{"enabled": false}}), "authentication is OFF")
}

// TestChartAgents renders a list of agents: their catalog in one ConfigMap mounted in every pod as
// TURNSTILE_AGENTS_FILE (and valid for pkg/agents), and per agent one worker Deployment serving
// only it and one ScaledObject on its own backlog.
func TestChartAgents(t *testing.T) {
	t.Parallel()
	r, err := render(t, map[string]any{
		"defaultAgent": "support",
		"agents": []any{
			map[string]any{"name": "support", "adapter": "demo", "limits": map[string]any{"in_flight": 64}},
			map[string]any{"name": "research", "adapter": "openai", "openai": map[string]any{"base_url": "http://llm:8000/v1", "model": "m"}},
		},
	})
	require.NoError(t, err)
	var workers []string
	for _, d := range r.all("Deployment") {
		if strings.HasPrefix(d.name(), "ts-turnstile-worker") {
			workers = append(workers, d.name())
		}
	}
	require.ElementsMatch(t, []string{"ts-turnstile-worker-support", "ts-turnstile-worker-research"}, workers, "one worker Deployment per agent, none for all")
	var scaled []string
	for _, so := range r.all("ScaledObject") {
		scaled = append(scaled, so.name())
	}
	require.ElementsMatch(t, []string{"ts-turnstile-worker-support", "ts-turnstile-worker-research"}, scaled)

	for _, agent := range []string{"support", "research"} {
		d := r.find("Deployment", "ts-turnstile-worker-"+agent)
		env := map[string]any{}
		for _, e := range get(d, "spec.template.spec.containers.0.env").([]any) {
			e := e.(map[string]any)
			env[e["name"].(string)] = e["value"]
		}
		require.Equal(t, agent, env["TURNSTILE_WORKER_AGENTS"])
		require.Equal(t, "/etc/turnstile/agents/agents.yaml", env["TURNSTILE_AGENTS_FILE"])
		require.Equal(t, "ts-turnstile-agents", get(d, "spec.template.spec.volumes.0.configMap.name"))
		require.Equal(t, "worker-"+agent, get(d, "spec.selector.matchLabels").(map[string]any)["app.kubernetes.io/component"])
		so := r.find("ScaledObject", "ts-turnstile-worker-"+agent)
		require.Equal(t, "ts-turnstile-worker-"+agent, get(so, "spec.scaleTargetRef.name"))
		require.Equal(t, "http://ts-turnstile-intake.prod.svc:8080/v1/backlog?agent="+agent, get(so, "spec.triggers.0.metadata.url"))
	}
	intake := r.find("Deployment", "ts-turnstile-intake")
	require.Equal(t, "ts-turnstile-agents", get(intake, "spec.template.spec.volumes.0.configMap.name"), "intake reads the catalog too")

	cm := r.find("ConfigMap", "ts-turnstile-agents")
	file := get(cm, "data").(map[string]any)["agents.yaml"].(string)
	cat, err := agents.Parse([]byte(file), config.Default())
	require.NoError(t, err, "the rendered catalog is a valid agents file:\n%s", file)
	require.Equal(t, []string{"research", "support"}, cat.Names())
	require.Equal(t, "support", cat.Default)
}
