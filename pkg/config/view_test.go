package config_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func viewOf(t *testing.T, c config.Config) map[string]config.Setting {
	t.Helper()
	out := map[string]config.Setting{}
	for _, s := range config.View(c) {
		_, dup := out[s.Name]
		require.False(t, dup, "%s appears twice", s.Name)
		out[s.Name] = s
	}
	return out
}

// TestViewRedactsSecrets sets every secret and every connection URL with a password, and requires
// none of them to appear anywhere in the view, while the other settings show their values.
func TestViewRedactsSecrets(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.Agents.OpenAIAPIKey = "sk-live-openai"
	c.Agents.HTTPAgentAuthorization = "Bearer agent-credential"
	c.Notifier.SigningSecret = "notifier-signing-secret"
	c.Auth.StreamTokenKeys = "k1:c3RyZWFtLXRva2VuLXNlY3JldC1rZXk="
	c.DatabaseURL = "postgres://turnstile:db-password@db:5432/turnstile?sslmode=require"
	c.RedisURL = "redis://:redis-password@cache:6379/0"
	c.LeaseTTL = 12 * time.Second
	v := viewOf(t, c)

	all := ""
	for _, s := range v {
		all += s.Name + "=" + s.Value + "\n"
	}
	for _, secret := range []string{"sk-live-openai", "agent-credential", "notifier-signing-secret", "c3RyZWFtLXRva2VuLXNlY3JldC1rZXk", "db-password", "redis-password"} {
		require.NotContains(t, all, secret)
	}
	for _, name := range []string{"TURNSTILE_OPENAI_API_KEY", "TURNSTILE_HTTP_AGENT_AUTHORIZATION", "TURNSTILE_NOTIFIER_SIGNING_SECRET", "TURNSTILE_STREAM_TOKEN_KEYS"} {
		require.Equal(t, config.Redacted, v[name].Value, name)
		require.True(t, v[name].Secret, name)
	}
	require.Equal(t, "postgres://turnstile:xxxxx@db:5432/turnstile?sslmode=require", v["TURNSTILE_DATABASE_URL"].Value)
	require.Equal(t, "redis://:xxxxx@cache:6379/0", v["TURNSTILE_REDIS_URL"].Value)
	require.Equal(t, "12s", v["TURNSTILE_LEASE_TTL"].Value)
	require.False(t, v["TURNSTILE_LEASE_TTL"].Secret)

	// A keyword connection string hides its password too; an unset secret shows as unset.
	c = config.Default()
	c.DatabaseURL = "host=db user=turnstile password='p w' dbname=turnstile"
	v = viewOf(t, c)
	require.Equal(t, "host=db user=turnstile password=xxxxx dbname=turnstile", v["TURNSTILE_DATABASE_URL"].Value)
	require.Empty(t, v["TURNSTILE_OPENAI_API_KEY"].Value)
}

// TestViewCoversEveryVariable requires the view to list every variable the configuration reads,
// and every variable whose name says it holds a credential to be tagged secret.
func TestViewCoversEveryVariable(t *testing.T) {
	t.Parallel()
	v := viewOf(t, config.Default())
	var names []string
	var collect func(reflect.Type)
	collect = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if name := f.Tag.Get("env"); name != "" {
				names = append(names, name)
			} else if f.Type.Kind() == reflect.Struct && f.IsExported() {
				collect(f.Type)
			}
		}
	}
	collect(reflect.TypeFor[config.Config]())
	require.Len(t, v, len(names))
	credential := regexp.MustCompile(`_(KEY|KEYS|SECRET|AUTHORIZATION|PASSWORD|TOKEN|CREDENTIALS)$`)
	for _, name := range names {
		require.Contains(t, v, name)
		if credential.MatchString(name) {
			require.True(t, v[name].Secret, "%s looks like a credential but is not tagged secret:\"true\"", name)
		}
		require.False(t, strings.Contains(v[name].Value, "\n"), name)
	}
}
