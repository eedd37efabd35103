package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzNewEvent holds NewEvent's bytes to encoding/json's for every payload it does not marshal with
// encoding/json: strings with HTML characters, line and paragraph separators, control characters
// and invalid UTF-8, and any numbers.
func FuzzNewEvent(f *testing.F) {
	f.Add("0193c4a2-7d5e-7c3a-9b1e-2f6a8d4c1e07", 1, "peer-1", "word ", 0)
	f.Add("t", -3, "<script>&amp;</script>", "\u2028\u2029\x00\x1f\x7f", 1<<40)
	f.Add("\xff\xfe", 0, "caf\xc3\xa9 \xe2\x82", "\"quoted\" \\ back/slash\t\n\r", -1)
	f.Fuzz(func(t *testing.T, turn string, attempt int, a, b string, n int) {
		base := EventBase{TurnID: turn, Attempt: attempt}
		for _, p := range []any{
			StartedData{EventBase: base, SessionID: a},
			DeltaData{EventBase: base, Index: n, Text: b},
			CompletedData{EventBase: base, Output: Output{Text: a + b}},
			ErrorData{EventBase: base, Error: b},
			ErrorData{EventBase: base},
			RetryingData{EventBase: base, PreviousAttempt: n},
		} {
			want, err := json.Marshal(p)
			require.NoError(t, err)
			require.Equal(t, string(want), string(NewEvent(EventDelta, p).Data), "%T", p)
		}
	})
}
