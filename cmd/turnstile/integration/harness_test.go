package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// startStack composes the given roles in this process against env and stops them at cleanup.
func startStack(t *testing.T, env *testenv.Env, rolesCSV string) *app.Stack {
	t.Helper()
	cfg := env.Config
	cfg.Roles = rolesCSV
	return startStackCfg(t, env, cfg)
}

type accepted struct {
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	StreamURL string `json:"stream_url"`
}

func postTurn(t *testing.T, base, session, text string) accepted {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": map[string]string{"text": text}})
	resp, err := http.Post(base+"/v1/sessions/"+session+"/turns", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var a accepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	require.Equal(t, "/v1/turns/"+a.TurnID, resp.Header.Get("Location"))
	return a
}

type deltaData struct {
	TurnID  string `json:"turn_id"`
	Attempt int    `json:"attempt"`
	Index   int    `json:"index"`
	Text    string `json:"text"`
}

// expectedEvents is what the demo agent publishes for one turn on its first attempt.
func expectedEvents(turnID, text string) []string {
	out := []string{"turn.started " + turnID}
	for i, w := range demo.Words(text) {
		out = append(out, fmt.Sprintf("turn.delta %s %d %q", turnID, i, w))
	}
	return append(out, "turn.completed "+turnID)
}

// describe renders events in the form expectedEvents uses.
func describe(t *testing.T, evs []testenv.Event) []string {
	t.Helper()
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		var d deltaData
		require.NoError(t, json.Unmarshal([]byte(e.Data), &d), e.Data)
		if e.Type == "turn.delta" {
			out = append(out, fmt.Sprintf("turn.delta %s %d %q", d.TurnID, d.Index, d.Text))
		} else {
			out = append(out, e.Type+" "+d.TurnID)
		}
	}
	return out
}

func countCompleted(n int) func(testenv.Event) bool {
	seen := 0
	return func(e testenv.Event) bool {
		if strings.HasPrefix(e.Type, "turn.completed") {
			seen++
		}
		return seen == n
	}
}

func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	if into != nil && resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(into))
	}
	return resp.StatusCode
}
