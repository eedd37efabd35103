package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/cmd/turnstile/roles"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// FuzzBadRecord posts arbitrary JSON bodies through intake to a real worker. Whatever a body
// holds — NUL escapes, unpaired surrogates, deep nesting, huge demo knobs — intake either refuses
// it with a 4xx (or a 429/503 to retry) or answers 202, and every 202'd turn ends in a terminal
// state within a bound, never for data the stores could not hold. A control turn posted on
// another session alongside each body succeeds within its usual time, so no body delays others.
// `go test` runs the seeds; `go test -fuzz FuzzBadRecord ./integration` explores further.
func FuzzBadRecord(f *testing.F) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range []string{
		`{"input":{"text":"hello"}}`,
		`{"input":{"text":"a\u0000b"}}`,
		`{"input":{"text":"hi"},"metadata":{"k":"\u0000"}}`,
		`{"input":{"text":"hi"},"metadata":{"\u0000":1}}`,
		`{"input":{"text":"hi"},"metadata":{"a":[{"b":"x\u0000"}]}}`,
		`{"input":{"text":"\ud800"}}`,
		`{"input":{"text":"hi"},"metadata":{"\udfff":"\ud800x","v":["\udbff"]}}`,
		`{"input":{"text":"hi"},"metadata":{"a":` + deep(31) + `}}`,
		`{"input":{"text":"hi"},"metadata":{"a":` + deep(32) + `}}`,
		`{"input":{"text":"hi"},"metadata":{"a":` + deep(9990) + `}}`,
		`{"input":{"text":"hi"},"metadata":{"demo":{"tokens":3000000}}}`,
		`{"input":{"text":"hi"},"metadata":{"demo":{"duration_ms":1e12,"tokens":1e300}}}`,
		`{"input":{"text":"hi"},"metadata":{"demo":{"fail_attempts":1000000,"panic_attempts":-5}}}`,
		`{"input":{"text":"hi"},"metadata":{"demo":{"panic_attempts":9007199254740993}}}`,
		`{"input":{"text":"hi"},"metadata":{"n":1e400}}`,
		`{"input":{"text":"hi"},"metadata":{"n":1e-400,"m":-0}}`,
	} {
		f.Add([]byte(s))
	}

	env := testenv.New(f, testenv.Options{Partitions: 1})
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway"
	cfg.DemoDelay = time.Microsecond
	base := "http://" + startFuzzStack(f, env, cfg).Addr()

	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		session := "fuzz-" + uuid.NewString()
		deadline := time.Now().Add(3 * time.Second)
		status, turnID := postFuzzBody(t, base, session, body, deadline)
		control := postTurn(t, base, "fuzz-control-"+uuid.NewString(), "control").TurnID

		switch status {
		case http.StatusAccepted:
			require.NotEmpty(t, turnID)
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			require.True(t, status >= 400 && status < 500, "a body is accepted or refused as the client's fault, not with %d: %s", status, body)
		}
		testenv.WaitFor(t, 5*time.Second, "the control turn to succeed", func() bool {
			return readTurn(t, env, control).Status == "succeeded"
		})
		if turnID == "" {
			return
		}
		testenv.WaitFor(t, time.Until(deadline)+10*time.Second, "the accepted turn to end", func() bool {
			return terminalCount(t, env, []string{turnID}) == 1
		})
		require.NotContains(t, readTurn(t, env, turnID).Error, "cannot be stored", "intake accepted what Postgres cannot hold: %s", body)
	})
}

// postFuzzBody posts body as a turn of session with the given deadline and returns the status and,
// for a 202, the turn ID.
func postFuzzBody(t *testing.T, base, session string, body []byte, deadline time.Time) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/sessions/"+session+"/turns", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Deadline-Epoch-Ms", strconv.FormatInt(deadline.UnixMilli(), 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusAccepted {
		return resp.StatusCode, ""
	}
	var a accepted
	require.NoError(t, json.Unmarshal(b, &a))
	return resp.StatusCode, a.TurnID
}

// startFuzzStack starts the roles of cfg for a fuzz target, stopped when it ends.
func startFuzzStack(tb testing.TB, env *testenv.Env, cfg config.Config) *app.Stack {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stack, err := app.Start(ctx, app.NewDeps(cfg, env.Log), roles.All)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(tb, stack.Stop(ctx))
	})
	return stack
}
