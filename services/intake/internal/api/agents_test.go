package api

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

const supportResearch = `
default: support
agents:
  - name: support
    adapter: demo
    limits: {default_deadline: 3m}
  - name: research
    adapter: openai
    openai: {base_url: "http://127.0.0.1:9/v1", model: fake}
`

// TestAgents reads the catalog through GET /v1/agents, refuses a turn naming an unknown agent
// with a 404 before anything reaches Kafka, sends a named agent's turn to its own topic with the
// agent in its envelope and row, and judges admission by each agent's own backlog.
func TestAgents(t *testing.T) {
	t.Parallel()
	var b *bundle
	var researchBacklogged atomic.Bool
	researchBacklogged.Store(true)
	b = setup(t, options{
		cfg: func(c *Config) {
			cat, err := agents.Parse([]byte(supportResearch), config.Default())
			require.NoError(t, err)
			c.Agents = func() *agents.Catalog { return cat }
			c.BacklogAgeOf = func(agent string) time.Duration {
				if agent == "research" && researchBacklogged.Load() {
					return 2 * time.Minute
				}
				return 0
			}
		},
		deps: func(d *Deps) {
			d.EnsureTopic = func(ctx context.Context, topic string) error {
				return kafka.EnsureTopics(ctx, b.env.Config.BrokerList(), 2, topic)
			}
		},
	})
	base := b.srv.URL

	t.Run("List", func(t *testing.T) {
		res := do(t, base, request{Method: http.MethodGet, Path: "/v1/agents"})
		require.Equal(t, http.StatusOK, res.Status)
		var list agentsList
		res.JSON(t, &list)
		require.Equal(t, "support", list.Default)
		require.Len(t, list.Agents, 2)
		require.Equal(t, "research", list.Agents[0].Name)
		require.Equal(t, "fake", list.Agents[0].Model)
		require.True(t, list.Agents[1].Default)
		require.Equal(t, (3 * time.Minute).Milliseconds(), list.Agents[1].Limits.DefaultDeadlineMs)

		res = do(t, base, request{Method: http.MethodGet, Path: "/v1/agents/research"})
		require.Equal(t, http.StatusOK, res.Status)
		res = do(t, base, request{Method: http.MethodGet, Path: "/v1/agents/nobody"})
		require.Equal(t, http.StatusNotFound, res.Status)
		require.Equal(t, httpx.ProblemAgentNotFound.Name, res.ProblemType(t))
	})

	t.Run("UnknownAgentRefusedBeforeKafka", func(t *testing.T) {
		res := postTurn(t, base, "s-unknown", `{"input":{"text":"hi"},"agent":"nobody"}`, nil)
		require.Equal(t, http.StatusNotFound, res.Status)
		require.Equal(t, httpx.ProblemAgentNotFound.Name, res.ProblemType(t))
		require.Zero(t, b.recordsInKafka(t))
	})

	t.Run("OwnTopicAndBacklog", func(t *testing.T) {
		// research's backlog is over the limit: its turns are refused, support's are not.
		res := postTurn(t, base, "s1", `{"input":{"text":"deep"},"agent":"research"}`, nil)
		require.Equal(t, http.StatusServiceUnavailable, res.Status)
		require.Equal(t, httpx.ProblemBacklog.Name, res.ProblemType(t))
		res = postTurn(t, base, "s1", `{"input":{"text":"hello"}}`, nil)
		require.Equal(t, http.StatusAccepted, res.Status)

		researchBacklogged.Store(false)
		res = postTurn(t, base, "s1", `{"input":{"text":"deep"},"agent":"research"}`, nil)
		require.Equal(t, http.StatusAccepted, res.Status)
		var acc Accepted
		res.JSON(t, &acc)

		require.EqualValues(t, 1, b.recordsInKafka(t), "the default agent's topic holds support's turn only")
		def := b.turnRecords(t, 1)
		e, err := wire.DecodeEnvelope(def[0].Value)
		require.NoError(t, err)
		require.Equal(t, "support", e.Agent)
		require.WithinDuration(t, e.AcceptedAt.Add(3*time.Minute), e.Deadline, time.Second, "support's default deadline")

		cl, err := kafka.NewClient(kgo.SeedBrokers(b.env.Config.BrokerList()...), kgo.ConsumeTopics(b.env.Config.Topic+".research"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var recs []*kgo.Record
		for len(recs) == 0 {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			recs = append(recs, fs.Records()...)
		}
		e, err = wire.DecodeEnvelope(recs[0].Value)
		require.NoError(t, err)
		require.Equal(t, "research", e.Agent)
		require.Equal(t, acc.TurnID, e.TurnID.String())

		b.recorder.Flush(ctx)
		var agent string
		require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT agent FROM turns WHERE turn_id = $1`, e.TurnID).Scan(&agent))
		require.Equal(t, "research", agent)
	})
}
