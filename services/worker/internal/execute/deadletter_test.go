package execute

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
)

// acceptingDLQ takes every dead letter.
type acceptingDLQ struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (d *acceptingDLQ) DeadLetter(_ context.Context, rec *kgo.Record) error {
	d.mu.Lock()
	d.recs = append(d.recs, rec)
	d.mu.Unlock()
	return nil
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	return out
}

// TestDeadLetteringLogged checks that a dead-lettered turn leaves a warn-level line naming the
// turn, its session, the reason, the error and the attempt, through the worker's own logger.
func TestDeadLetteringLogged(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	var buf syncBuffer
	dlq := &acceptingDLQ{}
	f := newUpstreamFixture(t, env, fixtureOptions{log: logging.New(&buf, "json", "info"), deadLetters: dlq}, func(int) agenttest.ChatAnswer {
		return agenttest.ChatAnswer{Error: `{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":401}`}
	})
	rec, turn := f.record(t, time.Minute)
	require.Equal(t, consume.Commit, f.x.Handle(context.Background(), rec))
	require.Len(t, dlq.recs, 1, "the failed turn was dead-lettered")

	var line map[string]any
	for _, l := range buf.lines(t) {
		if l["msg"] == "turn dead-lettered" {
			line = l
		}
	}
	require.NotNil(t, line, "a line says the turn was dead-lettered")
	require.Equal(t, "WARN", line["level"])
	require.Equal(t, turn.ShownTurnID(), line["turn_id"])
	require.Equal(t, turn.SessionID, line["session_id"])
	require.Equal(t, "failed", line["reason"])
	require.EqualValues(t, 1, line["attempt"])
	require.Contains(t, line["error"], "401")
	require.Equal(t, "turns.dlq", line["dlq_topic"])
}
