package app

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// version and commit, when set at link time (go build -ldflags "-X
// github.com/turnstile-run/turnstile/pkg/app.version=v1.2.3 -X ...app.commit=abc123"), override
// what the binary's build information says.
var (
	version string
	commit  string
)

// Build is what a binary knows of its own build.
type Build struct {
	// Version is the link-time version, else the main module's version ("(devel)" for a build
	// from a work tree).
	Version string
	// Commit is the link-time commit, else the VCS revision the build recorded (with "-dirty" when
	// the tree had changes), else "unknown".
	Commit string
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// BuildInfo returns the running binary's Build.
func BuildInfo() Build {
	info, ok := debug.ReadBuildInfo()
	return buildOf(info, ok, version, commit)
}

// buildOf is BuildInfo over the build information info (ok false: none) and the link-time values.
func buildOf(info *debug.BuildInfo, ok bool, linkVersion, linkCommit string) Build {
	b := Build{Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
	if ok {
		if info.Main.Version != "" {
			b.Version = info.Main.Version
		}
		var rev string
		var dirty bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			b.Commit = rev
			if dirty {
				b.Commit += "-dirty"
			}
		}
		if info.GoVersion != "" {
			b.GoVersion = info.GoVersion
		}
	}
	if linkVersion != "" {
		b.Version = linkVersion
	}
	if linkCommit != "" {
		b.Commit = linkCommit
	}
	return b
}

// String is the build as `turnstile version` prints it.
func (b Build) String() string {
	return fmt.Sprintf("version %s\ncommit %s\ngo %s\n", b.Version, b.Commit, b.GoVersion)
}

// registerBuildInfo adds turnstile_build_info{version,commit,goversion} 1 to reg.
func registerBuildInfo(reg prometheus.Registerer, b Build) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "turnstile_build_info",
		Help: "Always 1; its labels name the build of the running binary: version, commit and Go version.",
	}, []string{"version", "commit", "goversion"})
	g.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	reg.MustRegister(g)
}

// builtin runs the arguments every binary answers without configuration — -h, --help and help
// print the usage, version and --version the build — writing to stdout. It reports whether args
// named one.
func builtin(args []string, stdout io.Writer, defaultRoles string, available []Role) (bool, error) {
	if len(args) < 2 {
		return false, nil
	}
	switch args[1] {
	case "-h", "-help", "--help", "help":
		return true, usage(stdout, filepath.Base(args[0]), defaultRoles, available)
	case "version", "--version", "-version":
		_, err := io.WriteString(stdout, BuildInfo().String())
		return true, err
	}
	return false, nil
}

// usage writes the binary's usage: what it runs with no arguments, and its commands.
func usage(w io.Writer, name, defaultRoles string, available []Role) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [command [args]]\n\n", name)
	fmt.Fprintf(&b, "With no command, %s runs the roles TURNSTILE_ROLES names (default: %s) until\n", name, defaultRoles)
	b.WriteString("SIGINT or SIGTERM. It is configured by TURNSTILE_* environment variables\n")
	b.WriteString("(docs/CONFIGURATION.md).\n\nCommands:\n")
	for _, c := range commands(available) {
		fmt.Fprintf(&b, "  %s\n", c.Usage)
	}
	b.WriteString("  version     print the version, commit and Go version (also --version)\n")
	b.WriteString("  help        print this help (also -h, --help)\n")
	_, err := io.WriteString(w, b.String())
	return err
}
