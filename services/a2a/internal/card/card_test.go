package card

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCard(t *testing.T) {
	t.Parallel()
	s := config.Default().A2A
	s.URL = "https://agents.example.com"
	off := New(s, false, "/a2a")
	require.Equal(t, "https://agents.example.com/a2a", off.URL)
	require.True(t, off.Capabilities.Streaming)
	require.True(t, off.Capabilities.PushNotifications, "push configs are stored with the task and sent by the notifier role")
	require.Empty(t, off.SecuritySchemes)
	require.Equal(t, "chat", off.Skills[0].ID)
	on := New(s, true, "/a2a")
	b, err := json.Marshal(on)
	require.NoError(t, err)
	var back a2a.AgentCard
	require.NoError(t, json.Unmarshal(b, &back))
	require.IsType(t, a2a.HTTPAuthSecurityScheme{}, back.SecuritySchemes[SchemeName])
	s.URL = ""
	require.Empty(t, New(s, false, "/a2a").URL, "the handler fills the URL from each request")
}
