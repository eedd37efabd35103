package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestLangGraphCronsStore runs clients/langgraph's crons and store cases: @langchain/langgraph-sdk's
// client.crons (create, createForThread, search, count, update, delete; a one-second cron on a
// thread fires runs on it) and client.store (putItem, getItem, deleteItem, searchItems,
// listNamespaces), each served or refused legibly as the README's LangGraph section says.
func TestLangGraphCronsStore(t *testing.T) {
	dir := langgraphProject(t)
	env := testenv.New(t, testenv.Options{})
	base := startLangGraphStack(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + base}, "--test", "--test-reporter=spec", "test/crons-store.test.js")
	t.Log(out)
	require.NoError(t, err, "the crons and store suite failed")
	require.Contains(t, out, "ℹ fail 0")
}
