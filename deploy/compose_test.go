package deploy

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/region"
)

// documentedVars lists the variables of the configuration reference, docs/CONFIGURATION.md.
func documentedVars(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/CONFIGURATION.md")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(TURNSTILE_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	require.NotEmpty(t, out, "no configuration table in docs/CONFIGURATION.md")
	return out
}

// checkEnv asserts every TURNSTILE_* variable of a service is in the configuration reference and that the
// environment loads and validates as the service would load it.
func checkEnv(t *testing.T, service string, vars map[string]string) {
	t.Helper()
	documented := documentedVars(t)
	for k := range vars {
		if strings.HasPrefix(k, "TURNSTILE_") {
			require.True(t, documented[k], "%s sets %s, which docs/CONFIGURATION.md does not list", service, k)
		}
	}
	var c config.Config
	require.NoError(t, env.ParseWithOptions(&c, env.Options{Environment: vars}), service)
	c.ApplyDefaults()
	require.NoError(t, c.Validate(), "%s: its environment fails validation", service)
}

type composeFile struct {
	Services map[string]struct {
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Profiles    []string          `yaml:"profiles"`
		StopGrace   string            `yaml:"stop_grace_period"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f)) // yaml.v3 resolves the anchors and merge keys
	return f
}

func TestComposeStack(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	for _, name := range []string{"kafka", "postgres", "redis", "migrate", "intake", "worker-1", "worker-2", "gateway", "a2a", "aisdk", "langgraph", "notifier", "prometheus"} {
		require.Contains(t, f.Services, name)
	}
	require.Equal(t, "KRaft", func() string {
		if f.Services["kafka"].Environment["KAFKA_PROCESS_ROLES"] == "broker,controller" {
			return "KRaft"
		}
		return "ZooKeeper"
	}())
	require.Equal(t, []string{"observability"}, f.Services["prometheus"].Profiles, "Prometheus is optional")
	require.Equal(t, []string{"migrate"}, f.Services["migrate"].Command)

	built := map[string]string{"migrate": "intake", "intake": "intake", "worker-1": "worker", "worker-2": "worker", "gateway": "gateway", "a2a": "a2a", "aisdk": "aisdk", "langgraph": "langgraph", "notifier": "notifier"}
	for name, svc := range built {
		s := f.Services[name]
		require.NotNil(t, s.Build, name)
		require.Equal(t, ".", s.Build.Context, "%s builds from the repository root (its module's replace directives reach pkg)", name)
		require.Equal(t, "services/"+svc+"/Dockerfile", s.Build.Dockerfile, name)
		require.Equal(t, "turnstile-"+svc+":dev", s.Image, name)
		checkEnv(t, name, s.Environment)
		if name != "migrate" {
			require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s starts after the migrations", name)
			require.Equal(t, "off", s.Environment["TURNSTILE_MIGRATE"], name)
			for _, k := range []string{"TURNSTILE_DATABASE_URL", "TURNSTILE_REDIS_URL", "TURNSTILE_KAFKA_BROKERS"} {
				require.NotEmpty(t, s.Environment[k], "%s must set %s (its default points at the host's loopback)", name, k)
			}
		}
	}
	require.NotEqual(t, f.Services["worker-1"].Environment["TURNSTILE_INSTANCE_ID"], f.Services["worker-2"].Environment["TURNSTILE_INSTANCE_ID"])
	for _, name := range []string{"worker-1", "worker-2"} {
		var c config.Config
		require.NoError(t, env.ParseWithOptions(&c, env.Options{Environment: f.Services[name].Environment}))
		c.ApplyDefaults()
		grace, err := time.ParseDuration(f.Services[name].StopGrace)
		require.NoError(t, err, "%s needs a stop_grace_period", name)
		require.Greater(t, grace, c.DrainTimeout, "%s: docker must not kill a draining worker before its drain timeout", name)
	}
}

// TestServiceImagesBuild builds each service as its Dockerfile does: in the service's module alone,
// outside the workspace, without cgo.
func TestServiceImagesBuild(t *testing.T) {
	t.Parallel()
	for _, svc := range []string{"intake", "worker", "gateway", "a2a", "aisdk", "langgraph", "notifier", "router"} {
		df, err := os.ReadFile("../services/" + svc + "/Dockerfile")
		require.NoError(t, err)
		for _, want := range []string{"AS build", "GOWORK=off", "CGO_ENABLED=0", "./cmd/turnstile-" + svc, "distroless/static", "USER 65532:65532"} {
			require.Contains(t, string(df), want, "services/%s/Dockerfile", svc)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, "./cmd/turnstile-"+svc)
		cmd.Dir = "../services/" + svc
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "services/%s does not build on its own:\n%s", svc, out)
	}
}

// TestComposeRegions checks docker-compose.regions.yml: two regions, each a whole stack in one
// container with its own region code, Postgres schema, Redis key prefix and embedded broker, and
// one router whose region map names both by their service names.
func TestComposeRegions(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docker-compose.regions.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f))
	for _, name := range []string{"postgres", "redis", "region-euw1", "region-use1", "router"} {
		require.Contains(t, f.Services, name)
	}
	seen := map[string]map[string]bool{}
	for _, code := range []string{"euw1", "use1"} {
		name := "region-" + code
		s := f.Services[name]
		require.Equal(t, "cmd/turnstile/Dockerfile", s.Build.Dockerfile, name)
		e := s.Environment
		require.Equal(t, code, e["TURNSTILE_REGION"], name)
		var c config.Config
		require.NoError(t, env.ParseWithOptions(&c, env.Options{Environment: e}))
		c.ApplyDefaults()
		require.True(t, c.HasRole("broker"), "%s runs its own embedded broker", name)
		require.Equal(t, "127.0.0.1:9092", c.KafkaBrokers, "%s's roles use its own broker", name)
		for _, k := range []string{"TURNSTILE_DATABASE_SCHEMA", "TURNSTILE_KEY_PREFIX", "TURNSTILE_INSTANCE_ID"} {
			if seen[k] == nil {
				seen[k] = map[string]bool{}
			}
			require.NotEmpty(t, e[k], name)
			require.False(t, seen[k][e[k]], "%s: %s must differ between the regions", name, k)
			seen[k][e[k]] = true
		}
		checkEnv(t, name, e)
	}
	r := f.Services["router"]
	require.Equal(t, "services/router/Dockerfile", r.Build.Dockerfile)
	checkEnv(t, "router", r.Environment)
	m, err := region.Parse([]byte(r.Environment["TURNSTILE_REGIONS"]))
	require.NoError(t, err)
	for _, code := range []string{"euw1", "use1"} {
		reg, ok := m.Region(code)
		require.True(t, ok, code)
		require.Equal(t, "http://region-"+code+":8080", reg.URL, "the router reaches each region by its service name")
		require.Equal(t, r.Environment["TURNSTILE_REGIONS"], f.Services["region-"+code].Environment["TURNSTILE_REGIONS"], "one map for all")
	}
}
