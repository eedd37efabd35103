package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway"
)

// describeFrontDoor renders front-door events in the form expectedEvents uses.
func describeFrontDoor(t *testing.T, evs []frontdoor.Event) []string {
	t.Helper()
	out := make([]testenv.Event, len(evs))
	for i, e := range evs {
		out[i] = testenv.Event{ID: e.ID, Type: string(e.Type), Data: string(e.Data)}
	}
	return describe(t, out)
}

// readAll reads a stream to its end (io.EOF), bounded by the test.
func readAll(t *testing.T, s *frontdoor.Stream) []frontdoor.Event {
	t.Helper()
	var evs []frontdoor.Event
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		require.NoError(t, err)
		evs = append(evs, ev)
	}
}

// TestFrontDoorClient drives the native API through pkg/frontdoor, the client every protocol front
// door is built on: a turn posted, followed to its end across streams cut mid-turn (the client
// reconnects the way EventSource does and sees every event once, in order), resumed from the middle
// with a fresh stream token, read, listed and cancelled, and the native refusals relayed as
// Problems.
func TestFrontDoorClient(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	cfg := env.Config
	cfg.Roles = "broker,intake,worker,gateway"
	cfg.Gateway.Retry = 20 * time.Millisecond
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	c := frontdoor.New(frontdoor.Config{IntakeURL: base, GatewayURL: base})
	t.Cleanup(c.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session := "fd-" + testenv.RandomHex(4)

	t.Run("StreamAcrossCuts", func(t *testing.T) {
		text := "the front door follows one turn to its end"
		a, err := c.PostTurn(ctx, "", session, frontdoor.TurnRequest{
			Input:    wire.Input{Text: text},
			Metadata: map[string]any{"demo": map[string]any{"duration_ms": 600}},
		}, frontdoor.PostOptions{IdempotencyKey: "fd-1"})
		require.NoError(t, err)
		require.Equal(t, "queued", a.Status)

		again, err := c.PostTurn(ctx, "", session, frontdoor.TurnRequest{
			Input:    wire.Input{Text: text},
			Metadata: map[string]any{"demo": map[string]any{"duration_ms": 600}},
		}, frontdoor.PostOptions{IdempotencyKey: "fd-1"})
		require.NoError(t, err)
		require.Equal(t, a.TurnID, again.TurnID, "a retried post is the same turn")

		s, err := c.OpenStream(ctx, frontdoor.StreamRequest{SessionID: session, Token: a.StreamToken, TurnID: a.TurnID})
		require.NoError(t, err)
		defer s.Close()
		gw := stack.Component("gateway").(*gateway.Gateway)
		var evs []frontdoor.Event
		cuts := 0
		for {
			ev, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			evs = append(evs, ev)
			if ev.Type == wire.EventDelta && cuts < 3 {
				cuts++
				gw.CutStreams()
			}
		}
		require.Equal(t, 3, cuts)
		require.Equal(t, expectedEvents(a.TurnID, text), describeFrontDoor(t, evs))

		// Resume from the middle with a token minted without a turn: exactly the rest.
		g, err := c.StreamToken(ctx, "", session)
		require.NoError(t, err)
		require.Equal(t, session, g.SessionID)
		mid := len(evs) / 2
		r, err := c.OpenStream(ctx, frontdoor.StreamRequest{SessionID: session, Token: g.StreamToken, TurnID: a.TurnID, LastEventID: evs[mid].ID})
		require.NoError(t, err)
		defer r.Close()
		require.Equal(t, describeFrontDoor(t, evs[mid+1:]), describeFrontDoor(t, readAll(t, r)))

		turn, err := c.GetTurn(ctx, "", a.TurnID)
		require.NoError(t, err)
		require.Equal(t, wire.StatusSucceeded, turn.Status)
		var out wire.Output
		require.NoError(t, json.Unmarshal(turn.Output, &out))
		require.NotEmpty(t, out.Text)

		page, err := c.ListTurns(ctx, "", session, 10, "")
		require.NoError(t, err)
		require.Len(t, page.Turns, 1)
		require.Equal(t, a.TurnID, page.Turns[0].TurnID)

		done, err := c.CancelTurn(ctx, "", a.TurnID)
		require.NoError(t, err)
		require.Equal(t, string(wire.StatusSucceeded), done.Status, "a cancel of a finished turn reports its final status")
	})

	t.Run("Problems", func(t *testing.T) {
		_, err := c.GetTurn(ctx, "", "0190b1d2-0000-7000-8000-000000000000")
		var p *frontdoor.Problem
		require.ErrorAs(t, err, &p)
		require.Equal(t, http.StatusNotFound, p.Status)
		require.True(t, p.Of(httpx.ProblemTurnNotFound), p.Type)

		_, err = c.PostTurn(ctx, "", "bad session!", frontdoor.TurnRequest{Input: wire.Input{Text: "x"}}, frontdoor.PostOptions{})
		require.ErrorAs(t, err, &p)
		require.True(t, p.Of(httpx.ProblemInvalidSession), p.Type)
		require.NotEmpty(t, p.Body, "the native problem document is kept for relaying")

		_, err = c.OpenStream(ctx, frontdoor.StreamRequest{SessionID: session, LastEventID: "not-a-cursor"})
		require.ErrorAs(t, err, &p)
		require.Equal(t, http.StatusBadRequest, p.Status)

		down := frontdoor.New(frontdoor.Config{IntakeURL: "http://" + testenv.FreeAddr(t), GatewayURL: base, Timeout: 2 * time.Second})
		_, err = down.GetTurn(ctx, "", "0190b1d2-0000-7000-8000-000000000000")
		require.ErrorAs(t, err, &p)
		require.Equal(t, http.StatusServiceUnavailable, p.Status)
		require.Equal(t, frontdoor.UnavailableType, p.Type)
		require.Positive(t, p.RetryAfter)
		require.True(t, frontdoor.IsUnavailable(err))
		require.Contains(t, fmt.Sprint(err), "native api: 503")
	})
}
