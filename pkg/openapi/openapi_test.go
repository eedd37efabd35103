package openapi_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/openapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// documentedProblemTypes reads the Problem schema's description of its type member, which lists
// the types by status as "400: a, b. 401: c (why), d. …", into type → status.
func documentedProblemTypes(t *testing.T) map[string]int {
	t.Helper()
	line := regexp.MustCompile(`(?m)^\s*description: '(A stable URI; the last segment names the problem[^\n]*)'$`).FindSubmatch(openapi.Spec)
	require.NotNil(t, line, "the Problem schema documents its types")
	desc := regexp.MustCompile(`\s*\([^)]*\)`).ReplaceAllString(string(line[1]), "")
	out := map[string]int{}
	for _, g := range regexp.MustCompile(`(\d{3}): ([a-z0-9, -]+)\.`).FindAllStringSubmatch(desc, -1) {
		status, err := strconv.Atoi(g[1])
		require.NoError(t, err)
		for _, name := range strings.Split(g[2], ",") {
			out[strings.TrimSpace(name)] = status
		}
	}
	return out
}

// TestProblemTypesMatchCatalog keeps the document's list of problem types and httpx's catalog the
// same set, each type under the status the catalog answers it with.
func TestProblemTypesMatchCatalog(t *testing.T) {
	t.Parallel()
	catalog := map[string]int{}
	for _, pt := range httpx.ProblemTypes() {
		catalog[pt.Name] = pt.Status
	}
	require.Equal(t, catalog, documentedProblemTypes(t))
}
