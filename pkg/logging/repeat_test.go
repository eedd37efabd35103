package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lines decodes the JSON lines written to buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		out = append(out, m)
	}
	return out
}

func TestRepeated(t *testing.T) {
	t.Parallel()
	setup := func() (*Repeated, *bytes.Buffer, *time.Time) {
		var buf bytes.Buffer
		r := NewRepeated(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelWarn, "fetch error", 10*time.Second)
		now := time.Unix(1_000_000, 0)
		r.now = func() time.Time { return now }
		return r, &buf, &now
	}

	t.Run("FirstAtOnceThenOncePerInterval", func(t *testing.T) {
		t.Parallel()
		r, buf, now := setup()
		ctx := context.Background()
		require.True(t, r.Log(ctx, "a", slog.String("err", "x")))
		// A loop that fails every millisecond for 25 seconds writes three lines, not 25,000.
		wrote := 1
		for range 25_000 {
			*now = now.Add(time.Millisecond)
			if r.Log(ctx, "a", slog.String("err", "x")) {
				wrote++
			}
		}
		require.Equal(t, 3, wrote)
		ls := lines(t, buf)
		require.Len(t, ls, 3)
		require.Equal(t, "WARN", ls[0]["level"])
		require.Equal(t, "fetch error", ls[0]["msg"])
		require.NotContains(t, ls[0], "repeats", "a first occurrence stands for itself")
		// The second line stands for the 9,999 occurrences after the first within 10 s, and the
		// one it is.
		require.InDelta(t, 9_999, ls[1]["repeats"], 0)
		require.InDelta(t, 10*time.Second, ls[1]["over"], 0)
		require.InDelta(t, 9_999, ls[2]["repeats"], 0)
	})

	t.Run("KeysAreApart", func(t *testing.T) {
		t.Parallel()
		r, buf, now := setup()
		ctx := context.Background()
		for range 100 {
			*now = now.Add(time.Millisecond)
			r.Log(ctx, "a")
			r.Log(ctx, "b")
		}
		require.Len(t, lines(t, buf), 2, "one line for each key's first occurrence")
	})

	t.Run("KeysBounded", func(t *testing.T) {
		t.Parallel()
		r, _, now := setup()
		ctx := context.Background()
		for i := range 10 * repeatedKeysMax {
			*now = now.Add(time.Second)
			require.True(t, r.Log(ctx, fmt.Sprint(i)), "a new key logs at once")
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		require.LessOrEqual(t, len(r.keys), repeatedKeysMax+10)
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		var mu sync.Mutex
		r := NewRepeated(slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil)), slog.LevelWarn, "x", time.Hour)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 1000 {
					r.Log(context.Background(), "k")
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, lines(t, &buf), 1)
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
