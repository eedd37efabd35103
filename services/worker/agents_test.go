package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

const twoDemoAgents = `
default: support
agents:
  - name: support
    adapter: demo
    limits: {in_flight: 8}
  - name: research
    adapter: demo
    limits: {in_flight: 2, max_attempts: 1}
`

// TestWorkerServesNamedAgents runs a worker serving two agents of a catalog: each agent's turns
// come from its own topic (the default agent's from the turns topic) and run in its own lane,
// counted under its own agent label; an agent the catalog lacks is refused at start.
func TestWorkerServesNamedAgents(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	path := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte(twoDemoAgents), 0o600))
	env.Config.AgentsFile = path
	env.Config.DemoDelay = time.Millisecond

	t.Run("UnknownAgentRefused", func(t *testing.T) {
		c := env.Config
		c.WorkerAgents = "support,ghost"
		deps := app.NewDeps(c, env.Log)
		defer deps.Close()
		_, err := New(context.Background(), deps)
		require.ErrorContains(t, err, `TURNSTILE_WORKER_AGENTS: no agent named "ghost"`)
	})

	env.Config.WorkerAgents = "support,research"
	deps := app.NewDeps(env.Config, env.Log)
	t.Cleanup(deps.Close)
	w, err := New(context.Background(), deps)
	require.NoError(t, err)
	require.Len(t, w.lanes, 2)
	ctx := context.Background()
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { require.NoError(t, w.Stop(ctx)) })

	producer, err := kafka.NewClient(kafka.ProducerOpts(env.Config.BrokerList())...)
	require.NoError(t, err)
	defer producer.Close()
	testenv.WaitFor(t, 30*time.Second, "the worker to be ready", func() bool { return w.Ready() == nil })
	ids := map[string]uuid.UUID{}
	for agent, topic := range map[string]string{"support": env.Config.Topic, "research": env.Config.Topic + ".research"} {
		e := wire.Envelope{
			TurnID: uuid.New(), SessionID: "s-" + agent, Tenant: wire.DefaultTenant, Input: wire.Input{Text: "hello " + agent},
			Deadline: time.Now().Add(time.Minute), AcceptedAt: time.Now(), Agent: agent,
		}
		v, err := e.Encode()
		require.NoError(t, err)
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(e.SessionKey().String()), Value: v}).FirstErr())
		ids[agent] = e.TurnID
	}
	for agent, id := range ids {
		testenv.WaitFor(t, 30*time.Second, agent+"'s turn to succeed", func() bool {
			var status string
			var got *string
			err := env.Pool.QueryRow(ctx, `SELECT status, agent FROM turns WHERE turn_id = $1`, id).Scan(&status, &got)
			return err == nil && status == "succeeded" && got != nil && *got == agent
		})
		testenv.WaitFor(t, 30*time.Second, agent+"'s attempt to be counted", func() bool {
			return testutil.ToFloat64(w.metrics.attempts.WithLabelValues(agent, "succeeded")) == 1
		})
	}
}
