package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parts is a fake role made of parts that start in order; a part that fails leaves the ones before
// it running, as a role does that is half started. Stop stops what started.
type parts struct {
	n       int
	failAt  int // 1-based; 0 never fails
	started []chan struct{}
	stopped []chan struct{}
	ready   error
	running int
}

func newParts(n, failAt int) *parts {
	p := &parts{n: n, failAt: failAt}
	for range n {
		p.started = append(p.started, make(chan struct{}))
		p.stopped = append(p.stopped, make(chan struct{}))
	}
	return p
}

func (p *parts) Start(context.Context) error {
	for i := range p.n {
		if i+1 == p.failAt {
			return errors.New("part failed")
		}
		close(p.started[i])
		p.running = i + 1
	}
	return nil
}

func (p *parts) Stop(context.Context) error {
	for i := p.running - 1; i >= 0; i-- {
		close(p.stopped[i])
	}
	p.running = 0
	return nil
}

func (p *parts) Ready() error { return p.ready }

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testDeps(roles string) *Deps {
	cfg := config.Config{Roles: roles, HTTPAddr: "127.0.0.1:0"}
	return NewDeps(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func role(name string, c Component) Role {
	return Role{Name: name, New: func(context.Context, *Deps) (Component, error) { return c, nil }}
}

func TestStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("HalfStartedRoleIsStopped", func(t *testing.T) {
		t.Parallel()
		first, half, never := newParts(1, 0), newParts(3, 3), newParts(1, 0)
		_, err := Start(ctx, testDeps("first,half,never"), []Role{role("first", first), role("half", half), role("never", never)})
		require.ErrorContains(t, err, "start role half: part failed")
		require.True(t, isClosed(half.stopped[0]) && isClosed(half.stopped[1]),
			"the parts the failed role had started are stopped")
		require.True(t, isClosed(first.stopped[0]), "the role started before it is stopped")
		require.False(t, isClosed(never.started[0]), "the role after it never starts")
	})

	t.Run("ReadyzSaysWhy", func(t *testing.T) {
		t.Parallel()
		waiting := newParts(1, 0)
		waiting.ready = errors.New("waiting for kafka")
		st, err := Start(ctx, testDeps("ok,waiting"), []Role{role("ok", newParts(1, 0)), role("waiting", waiting)})
		require.NoError(t, err)
		defer func() { require.NoError(t, st.Stop(ctx)) }()
		resp, err := http.Get("http://" + st.Addr() + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		var body struct {
			NotReady []string          `json:"not_ready"`
			Reasons  map[string]string `json:"reasons"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, []string{"waiting"}, body.NotReady)
		require.Equal(t, map[string]string{"waiting": "waiting for kafka"}, body.Reasons)
	})

	t.Run("PprofOnlyWhenAsked", func(t *testing.T) {
		t.Parallel()
		st, err := Start(ctx, testDeps("p"), []Role{role("p", newParts(1, 0))})
		require.NoError(t, err)
		defer func() { require.NoError(t, st.Stop(ctx)) }()
		require.Empty(t, st.PprofAddr(), "off by default")
		requireStatus(t, "http://"+st.Addr()+"/debug/pprof/", http.StatusNotFound)

		deps := testDeps("p")
		deps.Config.PprofAddr = "127.0.0.1:0"
		st2, err := Start(ctx, deps, []Role{role("p", newParts(1, 0))})
		require.NoError(t, err)
		defer func() { require.NoError(t, st2.Stop(ctx)) }()
		require.NotEmpty(t, st2.PprofAddr())
		requireStatus(t, "http://"+st2.PprofAddr()+"/debug/pprof/goroutine?debug=1", http.StatusOK)
		requireStatus(t, "http://"+st2.Addr()+"/debug/pprof/", http.StatusNotFound)
	})

	t.Run("StopTwice", func(t *testing.T) {
		t.Parallel()
		p := newParts(2, 0)
		st, err := Start(ctx, testDeps("p"), []Role{role("p", p)})
		require.NoError(t, err)
		require.NoError(t, st.Stop(ctx))
		require.NoError(t, st.Stop(ctx))
		require.True(t, isClosed(p.stopped[0]) && isClosed(p.stopped[1]))
	})
}

func TestCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got []string
	greet := Command{Name: "greet", Usage: "greet NAME", Run: func(_ context.Context, env CommandEnv, args []string) error {
		got = args
		_, err := io.WriteString(env.Stdout, "hello")
		return err
	}}
	available := []Role{{Name: "a", Commands: []Command{greet}}, {Name: "b", Commands: []Command{{Name: "greet", Usage: "shadowed"}}}}

	t.Run("RoleContributes", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		env := CommandEnv{Stdout: &out, Log: slog.New(slog.DiscardHandler)}
		require.NoError(t, runCommand(ctx, env, available, []string{"greet", "x", "y"}))
		require.Equal(t, []string{"x", "y"}, got, "the command gets the arguments after its name")
		require.Equal(t, "hello", out.String())
	})

	t.Run("UnknownListsEvery", func(t *testing.T) {
		t.Parallel()
		err := runCommand(ctx, CommandEnv{}, available, []string{"nope"})
		require.EqualError(t, err, `unknown command "nope" (want: migrate [status], config [-output text|json], greet NAME)`)
	})

	t.Run("ConfigRedacted", func(t *testing.T) {
		t.Parallel()
		cfg := config.Default()
		cfg.Agents.OpenAIAPIKey = "sk-do-not-print"
		cfg.RedisURL = "redis://:hunter2@cache:6379/0"
		var text, js bytes.Buffer
		require.NoError(t, runCommand(ctx, CommandEnv{Config: cfg, Stdout: &text}, available, []string{"config"}))
		require.Contains(t, text.String(), "\nTURNSTILE_OPENAI_API_KEY="+config.Redacted+"\n")
		require.Contains(t, text.String(), "\nTURNSTILE_REDIS_URL=redis://:xxxxx@cache:6379/0\n")
		require.NoError(t, runCommand(ctx, CommandEnv{Config: cfg, Stdout: &js}, available, []string{"config", "-output", "json"}))
		var view []config.Setting
		require.NoError(t, json.Unmarshal(js.Bytes(), &view))
		require.Len(t, view, strings.Count(text.String(), "\n"))
		for _, out := range []string{text.String(), js.String()} {
			require.NotContains(t, out, "sk-do-not-print")
			require.NotContains(t, out, "hunter2")
		}
		require.Error(t, runCommand(ctx, CommandEnv{Config: cfg, Stdout: &js}, available, []string{"config", "-output", "yaml"}))
	})
}

func requireStatus(t *testing.T, url string, want int) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, want, resp.StatusCode, url)
}
