package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want cursor
		ok   bool
	}{
		{"", cursor{}, true},
		{"-1", cursor{}, true},
		{"k3f9:1732881234567-0", cursor{native: "k3f9:1732881234567-0"}, true},
		{subID("k3f9:1732881234567-0", 0), cursor{native: "k3f9:1732881234567-0", skip: 1}, true},
		{subID("", 2), cursor{skip: 3}, true},
		{"k3f9:1-0~x", cursor{}, false},
		{"k3f9:1-0~-1", cursor{}, false},
	} {
		got, ok := parseCursor(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestInputText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		refused        bool
	}{
		{"HumanString", `{"messages":[{"type":"human","content":"hi"}]}`, "hi", false},
		{"RoleUser", `{"messages":[{"role":"user","content":"hi"}]}`, "hi", false},
		{"ContentBlocks", `{"messages":[{"type":"human","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]}`, "a\nb", false},
		{"SeveralJoined", `{"messages":[{"type":"system","content":"s"},{"type":"human","content":"one"},{"type":"human","content":"two"}]}`, "one\n\ntwo", false},
		{"NoHuman", `{"messages":[{"type":"ai","content":"x"}]}`, "", true},
		{"NoInput", ``, "", true},
		{"NotMessages", `{"question":"x"}`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, refusal := inputText(json.RawMessage(tc.in))
			require.Equal(t, tc.refused, refusal != "", refusal)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRunStatusCoversEveryTurnStatus(t *testing.T) {
	t.Parallel()
	for s, want := range map[wire.Status]string{
		wire.StatusQueued: "pending", wire.StatusRunning: "running", wire.StatusSucceeded: "success",
		wire.StatusFailed: "error", wire.StatusCancelled: "interrupted", wire.StatusExpired: "timeout",
	} {
		require.Equal(t, want, runStatus(s))
	}
}

func TestStatesOnePerFinishedTurn(t *testing.T) {
	t.Parallel()
	now := time.Now()
	turn := func(status wire.Status, in, out string) frontdoor.Turn {
		t := frontdoor.Turn{TurnID: "euw1-" + uuid.New().String(), Turn: turnstore.Turn{Status: status, Attempt: 1, AcceptedAt: now}}
		t.Input, _ = json.Marshal(map[string]string{"text": in})
		if out != "" {
			t.Output, _ = json.Marshal(map[string]string{"text": out})
		}
		return t
	}
	turns := []frontdoor.Turn{turn(wire.StatusSucceeded, "one", "uno"), turn(wire.StatusFailed, "two", ""), turn(wire.StatusRunning, "three", "")}
	st := states("th", turns)
	require.Len(t, st, 2, "the running turn has no checkpoint yet")
	require.Equal(t, turns[1].TurnID, st[0].Checkpoint.CheckpointID, "newest first")
	require.Equal(t, st[1].Checkpoint, st[0].ParentCheckpoint)
	require.Nil(t, st[1].ParentCheckpoint)
	require.Equal(t, "error", threadStatus(turns[:2]))
	require.Equal(t, "busy", threadStatus(turns))
	require.Equal(t, "idle", threadStatus(nil))
}
