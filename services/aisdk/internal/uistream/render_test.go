package uistream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

const turnID = "0193a1b2-0000-7000-8000-000000000001"

type nativeEvent struct {
	id   string
	typ  wire.EventType
	data json.RawMessage
}

// log builds a turn's native events as a worker publishes them, with ids in stream order.
type log struct {
	epoch  string
	events []nativeEvent
}

func (l *log) add(typ wire.EventType, payload any) {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	l.events = append(l.events, nativeEvent{fmt.Sprintf("%s:1700000000000-%d", l.epoch, len(l.events)), typ, b})
}

// attempt appends one attempt of the demo agent: its first n words (all when n < 0), an optional
// tool call after the second word, and completion when it got through every word.
func (l *log) attempt(attempt, n int, words []string, tool bool) {
	base := wire.EventBase{TurnID: turnID, Attempt: attempt}
	if attempt == 1 {
		l.add(wire.EventStarted, wire.StartedData{EventBase: base, SessionID: "s1"})
	} else {
		l.add(wire.EventRetrying, wire.RetryingData{EventBase: base, PreviousAttempt: attempt - 1})
	}
	if n < 0 || n > len(words) {
		n = len(words)
	}
	for i, w := range words[:n] {
		if tool && i == 2 {
			l.add(wire.EventToolCall, wire.ToolCallData{EventBase: base, CallID: "call-1", Name: "lookup", Arguments: json.RawMessage(`{"q": "x"}`)})
			l.add(wire.EventToolResult, wire.ToolResultData{EventBase: base, CallID: "call-1", Result: json.RawMessage(`{"a":1}`)})
		}
		l.add(wire.EventDelta, wire.DeltaData{EventBase: base, Index: i, Text: w})
	}
	if n == len(words) {
		l.add(wire.EventCompleted, wire.CompletedData{EventBase: base, Output: wire.Output{Text: strings.Join(words, "")}})
	}
}

type rendered struct {
	id   string
	part Part
}

// render runs the events through one Resumer at cur.
func render(t require.TestingT, evs []nativeEvent, cur Cursor) []rendered {
	r := NewResumer(turnID, cur)
	var out []rendered
	for _, e := range evs {
		parts, err := r.Render(e.id, e.typ, e.data)
		require.NoError(t, err)
		for _, p := range parts {
			out = append(out, rendered{e.id, p})
		}
	}
	return out
}

// text concatenates the text deltas; types lists the part types.
func text(rs []rendered) string {
	var b strings.Builder
	for _, r := range rs {
		if r.part.Type() == "text-delta" {
			b.WriteString(r.part["delta"].(string))
		}
	}
	return b.String()
}

func types(rs []rendered) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.part.Type())
	}
	return out
}

func TestRenderer(t *testing.T) {
	t.Parallel()
	words := demo.Words("hello")

	t.Run("Answer", func(t *testing.T) {
		t.Parallel()
		l := &log{epoch: "e1"}
		l.attempt(1, -1, words, false)
		rs := render(t, l.events, Cursor{})
		require.Equal(t, demo.Output("hello", demo.Knobs{}), text(rs))
		want := []string{"start", "text-start"}
		for range words {
			want = append(want, "text-delta")
		}
		require.Equal(t, append(want, "text-end", "finish"), types(rs))
		require.Equal(t, turnID, rs[0].part["messageId"])
	})

	t.Run("ToolCallSplitsText", func(t *testing.T) {
		t.Parallel()
		l := &log{epoch: "e1"}
		l.attempt(1, -1, words, true)
		ts := types(render(t, l.events, Cursor{}))
		require.Equal(t, []string{
			"start", "text-start", "text-delta", "text-delta", "text-end",
			"tool-input-available", "tool-output-available", "text-start",
		}, ts[:8])
		rs := render(t, l.events, Cursor{})
		require.Equal(t, "call-1", rs[5].part["toolCallId"])
		require.JSONEq(t, `{"q":"x"}`, string(rs[5].part["input"].(json.RawMessage)))
		require.JSONEq(t, `{"a":1}`, string(rs[6].part["output"].(json.RawMessage)))
	})

	t.Run("RetryShowsTheAnswerOnce", func(t *testing.T) {
		t.Parallel()
		l := &log{epoch: "e1"}
		l.attempt(1, 3, words, true)
		l.attempt(2, -1, words, true)
		rs := render(t, l.events, Cursor{})
		require.Equal(t, strings.Join(words, ""), text(rs))
		calls := 0
		for _, r := range rs {
			if r.part.Type() == "tool-input-available" {
				calls++
			}
		}
		require.Equal(t, 1, calls)
		require.Equal(t, "finish", rs[len(rs)-1].part.Type())
	})

	t.Run("DivergedRetryStartsANewTextPart", func(t *testing.T) {
		t.Parallel()
		l := &log{epoch: "e1"}
		l.attempt(1, 3, words, false)
		other := demo.Words("something else")
		l.attempt(2, -1, other, false)
		rs := render(t, l.events, Cursor{})
		// Both replies begin "You said ": the retry repeats those two words, then diverges at the
		// third, which the client already shows otherwise.
		require.Equal(t, words[:2], other[:2])
		require.Equal(t, strings.Join(words[:3], "")+strings.Join(other[2:], ""), text(rs))
		starts := 0
		for _, r := range rs {
			if r.part.Type() == "text-start" {
				starts++
			}
		}
		require.Equal(t, 2, starts)
	})

	t.Run("TerminalParts", func(t *testing.T) {
		t.Parallel()
		for typ, want := range map[wire.EventType]string{
			wire.EventFailed: "error", wire.EventExpired: "error", wire.EventCancelled: "abort",
		} {
			l := &log{epoch: "e1"}
			l.attempt(1, 2, words, false)
			l.add(typ, wire.ErrorData{EventBase: wire.EventBase{TurnID: turnID, Attempt: 1}, Error: "boom"})
			l.add(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: turnID, Attempt: 1}, Index: 5, Text: "late"})
			rs := render(t, l.events, Cursor{})
			require.Equal(t, []string{"text-end", want}, types(rs)[len(rs)-2:], typ)
		}
	})

	t.Run("OtherTurnsRenderNothing", func(t *testing.T) {
		t.Parallel()
		r := NewRenderer(turnID)
		parts, err := r.Render(wire.EventDelta, json.RawMessage(`{"turn_id":"other","attempt":1,"index":0,"text":"x"}`))
		require.NoError(t, err)
		require.Empty(t, parts)
		_, err = r.Render(wire.EventDelta, json.RawMessage(`{`))
		require.Error(t, err)
	})
}

// TestResumeExactlyOnce: whatever the cursor, the parts after it are exactly the parts a
// full rendering has after it, across retries; a cursor of another epoch gets the whole turn.
func TestResumeExactlyOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		words := demo.Reply("x", demo.Knobs{Tokens: rapid.IntRange(1, 12).Draw(rt, "tokens")})
		tool := rapid.Bool().Draw(rt, "tool")
		l := &log{epoch: "e1"}
		attempts := rapid.IntRange(1, 3).Draw(rt, "attempts")
		for a := 1; a < attempts; a++ {
			l.attempt(a, rapid.IntRange(0, len(words)-1).Draw(rt, "cut"), words, tool)
		}
		l.attempt(attempts, -1, words, tool)
		full := render(rt, l.events, Cursor{})
		require.Equal(rt, strings.Join(words, ""), text(full))

		at := rapid.IntRange(0, len(l.events)-1).Draw(rt, "cursor")
		cur, err := ParseCursor(l.events[at].id)
		require.NoError(rt, err)
		var want []rendered
		for _, r := range full {
			if !cur.Covers(r.id) {
				want = append(want, r)
			}
		}
		got := render(rt, l.events, cur)
		// A cursor inside a text part gets the part re-opened first, under its own id.
		if len(got) > 0 && got[0].part.Type() == "text-start" && (len(want) == 0 || want[0].part.Type() != "text-start") {
			require.NotEmpty(rt, want)
			require.Equal(rt, want[0].id, got[0].id)
			got = got[1:]
		}
		require.Equal(rt, want, got)
		var before []rendered
		for _, r := range full {
			if cur.Covers(r.id) {
				before = append(before, r)
			}
		}
		require.Equal(rt, text(full), text(before)+text(got), "the parts before the cursor and after it make the answer once")

		stale, err := ParseCursor("e0:1700000000000-" + fmt.Sprint(at))
		require.NoError(rt, err)
		require.Equal(rt, full, render(rt, l.events, stale))
	})
}

func TestParseCursor(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"x", ":1-0", "e:1", "e:a-0", "e:1-b"} {
		_, err := ParseCursor(bad)
		require.Error(t, err, bad)
	}
	c, err := ParseCursor("k3f9:17-2")
	require.NoError(t, err)
	require.True(t, c.Covers("k3f9:17-2"))
	require.True(t, c.Covers("k3f9:16-9"))
	require.False(t, c.Covers("k3f9:17-3"))
	require.False(t, c.Covers("other:1-0"))
	require.False(t, Cursor{}.Covers("k3f9:1-0"))
}
