package configdoc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// setup writes src as the only file of a package config in a fresh directory.
func setup(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.go"), []byte("package config\n\nimport \"time\"\n\nvar _ time.Duration\n\n"+src), 0o600))
	return dir
}

func TestRead(t *testing.T) {
	t.Parallel()
	t.Run("SectionsAndRows", func(t *testing.T) {
		t.Parallel()
		dir := setup(t, `type Config struct {
	// # Process
	//
	// Read by every role.

	// Addr is where the process listens, e.g. 127.0.0.1:80. Defaults to 127.0.0.1:8080.
	Addr string `+"`env:\"TURNSTILE_ADDR\"`"+`
	Sub SubSettings
}

type SubSettings struct {
	// # Sub
	//
	// The sub role.

	// Wait is how long, when TURNSTILE_ADDR is "x|y". Defaults to 3s, or a fifth of "ttl".
	Wait time.Duration `+"`env:\"TURNSTILE_WAIT\"`"+`
	// Share is a <percent>. Defaults to 0.5.
	Share *float64 `+"`env:\"TURNSTILE_SHARE\"`"+`
}
`)
		sections, err := Read(dir)
		require.NoError(t, err)
		require.Equal(t, []Section{
			{Title: "Process", Intro: "Read by every role.", Rows: []Row{
				{Field: "Config.Addr", Variable: "TURNSTILE_ADDR", Kind: "text", Default: "127.0.0.1:8080", Meaning: "Where the process listens, e.g. 127.0.0.1:80."},
			}},
			{Title: "Sub", Intro: "The sub role.", Rows: []Row{
				{Field: "Config.Sub.Wait", Variable: "TURNSTILE_WAIT", Kind: "duration", Default: `3s, or a fifth of "ttl"`, Meaning: `How long, when TURNSTILE_ADDR is "x|y".`},
				{Field: "Config.Sub.Share", Variable: "TURNSTILE_SHARE", Kind: "number", Default: "0.5", Meaning: "A <percent>."},
			}},
		}, sections)
		doc := string(Render(sections))
		require.Contains(t, doc, "- [Process](#process)\n- [Sub](#sub)\n")
		require.Contains(t, doc, "| `TURNSTILE_ADDR` | text | `127.0.0.1:8080` | Where the process listens, e.g. 127.0.0.1:80. |\n")
		require.Contains(t, doc, "| `TURNSTILE_WAIT` | duration | `3s`, or a fifth of `ttl` | How long, when `TURNSTILE_ADDR` is `x\\|y`. |\n")
		require.Contains(t, doc, "| `TURNSTILE_SHARE` | number | `0.5` | A &lt;percent&gt;. |\n")
	})
	t.Run("EveryViolationReported", func(t *testing.T) {
		t.Parallel()
		dir := setup(t, `type Config struct {
	// # Process

	Bare string `+"`env:\"TURNSTILE_BARE\"`"+`
	// NoDefault is a setting.
	NoDefault string `+"`env:\"TURNSTILE_NO_DEFAULT\"`"+`
	// Something else. Defaults to x.
	Misnamed string `+"`env:\"TURNSTILE_MISNAMED\"`"+`
	// Untagged is read from nowhere. Defaults to x.
	Untagged string
}
`)
		_, err := Read(dir)
		require.Error(t, err)
		for _, want := range []string{
			"Config.Bare (TURNSTILE_BARE): no doc comment",
			"Config.NoDefault (TURNSTILE_NO_DEFAULT): no sentence begins \"Defaults to\"",
			"Config.Misnamed (TURNSTILE_MISNAMED): the comment does not begin with \"Misnamed\"",
			"Config.Untagged: no env tag",
		} {
			require.ErrorContains(t, err, want)
		}
	})
}
