package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLangGraphSettings(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := Default()
		require.Equal(t, []string{LangGraphAssistantsDefault}, c.LangGraph.AssistantList())
	})
	t.Run("List", func(t *testing.T) {
		t.Parallel()
		c := Default()
		c.LangGraph.Assistants = "agent, researcher"
		require.NoError(t, c.Validate())
		require.Equal(t, []string{"agent", "researcher"}, c.LangGraph.AssistantList())
	})
	t.Run("BadIDsRefused", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{"a/b", ",", "x?y"} {
			c := Default()
			c.LangGraph.Assistants = bad
			require.ErrorContains(t, c.Validate(), "TURNSTILE_LANGGRAPH_ASSISTANTS", bad)
		}
	})
}
