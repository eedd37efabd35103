package app

import (
	"bytes"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

// TestHelpAndVersion runs a binary's main logic with each way of asking for help or the version:
// the answer goes to standard output and the exit code is 0, whatever the configuration.
func TestHelpAndVersion(t *testing.T) {
	// TURNSTILE_ROLES set to a role no binary has would fail the configuration, were it read.
	t.Setenv("TURNSTILE_ROLES", "no-such-role")
	available := []Role{{Name: "a", Commands: []Command{{Name: "greet", Usage: "greet NAME"}}}}
	for _, arg := range []string{"-h", "--help", "-help", "help"} {
		var out bytes.Buffer
		require.Equal(t, 0, run([]string{"/usr/bin/turnstile-x", arg}, &out, "a", available), arg)
		require.Contains(t, out.String(), "Usage: turnstile-x [command [args]]", arg)
		require.Contains(t, out.String(), "  greet NAME\n", arg)
		require.Contains(t, out.String(), "  migrate [status]\n", arg)
		require.Contains(t, out.String(), "  config [-output text|json]\n", arg)
		require.Contains(t, out.String(), "default: a", arg)
	}
	for _, arg := range []string{"version", "--version", "-version"} {
		var out bytes.Buffer
		require.Equal(t, 0, run([]string{"turnstile", arg}, &out, "a", available), arg)
		b := BuildInfo()
		require.Equal(t, "version "+b.Version+"\ncommit "+b.Commit+"\ngo "+b.GoVersion+"\n", out.String(), arg)
		require.True(t, strings.HasPrefix(b.GoVersion, "go"), b.GoVersion)
	}
}

// TestBuildOf reads the version and commit from the build information, and prefers the
// link-time values.
func TestBuildOf(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"},
	}}
	require.Equal(t, Build{Version: "(devel)", Commit: "0123abcd-dirty", GoVersion: "go1.99.1"}, buildOf(info, true, "", ""))
	require.Equal(t, Build{Version: "v1.2.3", Commit: "feed", GoVersion: "go1.99.1"}, buildOf(info, true, "v1.2.3", "feed"))
	require.Equal(t, Build{Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}, buildOf(nil, false, "", ""))
}

// TestBuildInfoMetric finds turnstile_build_info on the registry every role's /metrics serves.
func TestBuildInfoMetric(t *testing.T) {
	t.Parallel()
	d := NewDeps(config.Config{InstanceID: "t"}, slog.New(slog.DiscardHandler))
	defer d.Close()
	b := BuildInfo()
	want := `# HELP turnstile_build_info Always 1; its labels name the build of the running binary: version, commit and Go version.
# TYPE turnstile_build_info gauge
turnstile_build_info{commit="` + b.Commit + `",goversion="` + b.GoVersion + `",version="` + b.Version + `"} 1
`
	require.NoError(t, testutil.GatherAndCompare(d.Registry, strings.NewReader(want), "turnstile_build_info"))
}
