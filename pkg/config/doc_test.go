package config

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config/internal/configdoc"
)

// docPath is the generated configuration reference, from this package's directory.
const docPath = "../../docs/CONFIGURATION.md"

// TestConfigurationDoc keeps docs/CONFIGURATION.md the rendering of this package's field
// comments: it regenerates the document in memory and compares.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	got, err := configdoc.Generate(".")
	require.NoError(t, err, "every setting needs a doc comment that begins with its field name and has a sentence beginning \"Defaults to\" (see pkg/config/internal/configdoc)")
	want, err := os.ReadFile(docPath)
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/CONFIGURATION.md is stale: run `%s` (go run ./pkg/config/internal/gendoc) from the repository root and commit the result", configdoc.Command)
	}
}

// TestConfigurationDocCoversEveryVariable checks the document against what Load reads: every env
// tag reflection finds in Config is a row, and no row names a variable Load does not read.
func TestConfigurationDocCoversEveryVariable(t *testing.T) {
	t.Parallel()
	sections, err := configdoc.Read(".")
	require.NoError(t, err)
	var documented []string
	for _, s := range sections {
		for _, r := range s.Rows {
			documented = append(documented, r.Variable)
		}
	}
	read := envVariables(reflect.TypeOf(Config{}))
	slices.Sort(documented)
	slices.Sort(read)
	require.Equal(t, read, documented)
	require.Len(t, slices.Compact(slices.Clone(read)), len(read), "two fields read the same variable")
}

// envVariables lists the env tags of t and the settings structs it holds, as Load reads them.
func envVariables(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, envVariables(f.Type)...)
			continue
		}
		if tag := f.Tag.Get("env"); tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// TestEnvironmentReadOnlyHere checks that no role reads a TURNSTILE_* variable of its own: outside
// tests and the test environment, every os.Getenv or os.LookupEnv of one names a Config field, so
// it is in the configuration reference.
func TestEnvironmentReadOnlyHere(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, v := range envVariables(reflect.TypeOf(Config{})) {
		known[v] = true
	}
	getenv := regexp.MustCompile(`(?:Getenv|LookupEnv)\("(TURNSTILE_[A-Z0-9_]+)"\)`)
	root := "../.."
	var strays []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", "testenv", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range getenv.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] {
				strays = append(strays, path+": "+m[1])
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, strays, "a TURNSTILE_* variable read outside pkg/config is missing from docs/CONFIGURATION.md: make it a Config field")
}
