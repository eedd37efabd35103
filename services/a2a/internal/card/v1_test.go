package card

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/config"
)

// TestJSONBothVersions: the one card decodes as a2a-go's 0.3 AgentCard (url, preferred transport,
// the Bearer scheme) and, by the proto JSON mapping, as 1.0's AgentCard naming JSON-RPC and
// HTTP+JSON at 1.0 and the same scheme.
func TestJSONBothVersions(t *testing.T) {
	t.Parallel()
	s := config.Default().A2A
	s.URL = "https://agents.example.com"
	c := New(s, true, "/a2a")
	b, err := JSON(c, "https://agents.example.com/a2a/rest")
	require.NoError(t, err)

	var old a2a.AgentCard
	require.NoError(t, json.Unmarshal(b, &old))
	require.Equal(t, "https://agents.example.com/a2a", old.URL)
	require.Equal(t, a2a.TransportProtocolJSONRPC, old.PreferredTransport)
	require.Equal(t, ProtocolVersion, old.ProtocolVersion)
	require.IsType(t, a2a.HTTPAuthSecurityScheme{}, old.SecuritySchemes[SchemeName])
	require.True(t, old.Capabilities.Streaming)

	var cur a2apb.AgentCard
	require.NoError(t, a2apb.UnmarshalJSON(b, &cur))
	var ifaces []string
	for _, i := range cur.GetSupportedInterfaces() {
		ifaces = append(ifaces, i.GetProtocolBinding()+" "+i.GetProtocolVersion()+" "+i.GetUrl())
	}
	require.Equal(t, []string{
		"JSONRPC 1.0 https://agents.example.com/a2a",
		"HTTP+JSON 1.0 https://agents.example.com/a2a/rest",
		"JSONRPC 0.3.0 https://agents.example.com/a2a",
	}, ifaces)
	require.Equal(t, "Bearer", cur.GetSecuritySchemes()[string(SchemeName)].GetHttpAuthSecurityScheme().GetScheme())
	require.Contains(t, cur.GetSecurityRequirements()[0].GetSchemes(), string(SchemeName))
	require.True(t, cur.GetCapabilities().GetPushNotifications())
	require.Equal(t, "chat", cur.GetSkills()[0].GetId())
}
