package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestIdempotentRetries sends one POST five times at once with one Idempotency-Key: every answer is
// the same 202 body, every record carries the same turn ID; the same key with another body is a 422,
// on the replica that recorded the turn and on another.
func TestIdempotentRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	body := `{"input":{"text":"once"}}`
	hdr := map[string]string{"Idempotency-Key": "key-1"}

	t.Run("ConcurrentSameKey", func(t *testing.T) {
		bodies := make([]string, 5)
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Go(func() {
				resp := postTurn(t, b.srv.URL, "idem", body, hdr)
				require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
				bodies[i] = string(resp.Body)
			})
		}
		wg.Wait()
		for _, got := range bodies[1:] {
			require.Equal(t, bodies[0], got)
		}
		var a Accepted
		require.NoError(t, jsonUnmarshal(bodies[0], &a))
		for _, r := range b.turnRecords(t, b.recordsInKafka(t)) {
			require.Equal(t, a.TurnID, decodeEnvelope(t, r.Value).TurnID.String())
		}
		// A later retry is the same too.
		require.Equal(t, bodies[0], string(postTurn(t, b.srv.URL, "idem", body, hdr).Body))
	})

	t.Run("SameKeyOtherBody", func(t *testing.T) {
		before := b.recordsInKafka(t)
		resp := postTurn(t, b.srv.URL, "idem", `{"input":{"text":"twice"}}`, hdr)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		require.Equal(t, ProblemIdempotencyReuse, resp.ProblemType(t))
		require.Equal(t, before, b.recordsInKafka(t))
	})

	t.Run("AnotherReplica", func(t *testing.T) {
		// A replica that has not seen the key finds the turn's row after its produce.
		other := New(testConfig(b.env), Deps{
			Producer: b.producer, Pool: b.env.Pool, Redis: b.env.Redis, Signer: b.signer, Recorder: b.recorder,
			Log: b.env.Log, Registry: prometheus.NewRegistry(),
		})
		r := chi.NewRouter()
		other.Routes(r)
		srv := httptest.NewServer(r)
		defer srv.Close()
		first := postTurn(t, b.srv.URL, "idem-r", body, hdr)
		require.Equal(t, http.StatusAccepted, first.Status)

		before := b.recordsInKafka(t)
		resp := postTurn(t, srv.URL, "idem-r", `{"input":{"text":"twice"}}`, hdr)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		require.Equal(t, ProblemIdempotencyReuse, resp.ProblemType(t))
		// This replica learned of the first request only after producing: the refused request's
		// record is in Kafka, carrying its own request hash, which no worker's claim accepts.
		require.Equal(t, before+1, b.recordsInKafka(t))
		turnID := accepted(t, first).TurnID
		var stored []byte
		require.NoError(t, b.env.Pool.QueryRow(context.Background(), `SELECT request_hash FROM turns WHERE turn_id = $1`, turnID).Scan(&stored))
		var hashes [][]byte
		for _, rec := range b.turnRecords(t, before+1) {
			if env := decodeEnvelope(t, rec.Value); env.TurnID.String() == turnID {
				hashes = append(hashes, env.RequestHash)
			}
		}
		require.Len(t, hashes, 2, "the first request and the refused one")
		require.Equal(t, stored, hashes[0])
		require.NotEqual(t, stored, hashes[1])
		// Now both replicas know the turn: a retry with the first body gets the first answer.
		require.Equal(t, string(first.Body), string(postTurn(t, srv.URL, "idem-r", body, hdr).Body))
		require.Equal(t, before+1, b.recordsInKafka(t), "a retry a replica has recorded is not produced again")
	})

	t.Run("SameKeyOtherSession", func(t *testing.T) {
		// A key names a request within its session: another session gets another turn.
		a1, a2 := accepted(t, postTurn(t, b.srv.URL, "idem-a", body, hdr)), accepted(t, postTurn(t, b.srv.URL, "idem-b", body, hdr))
		require.NotEqual(t, a1.TurnID, a2.TurnID)
	})

	t.Run("ClientTurnID", func(t *testing.T) {
		id := uuid.NewString()
		withID := `{"input":{"text":"mine"},"turn_id":"` + id + `"}`
		a1 := postTurn(t, b.srv.URL, "idem-c", withID, nil)
		a2 := postTurn(t, b.srv.URL, "idem-c", withID, nil)
		require.Equal(t, string(a1.Body), string(a2.Body))
		require.Equal(t, id, accepted(t, a1).TurnID)
		other := postTurn(t, b.srv.URL, "idem-c", `{"input":{"text":"other"},"turn_id":"`+id+`"}`, nil)
		require.Equal(t, http.StatusUnprocessableEntity, other.Status)
	})

	t.Run("NoKeyNewTurn", func(t *testing.T) {
		a1, a2 := accepted(t, postTurn(t, b.srv.URL, "idem-d", body, nil)), accepted(t, postTurn(t, b.srv.URL, "idem-d", body, nil))
		require.NotEqual(t, a1.TurnID, a2.TurnID)
	})
}

func accepted(t testing.TB, r response) Accepted {
	t.Helper()
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	var a Accepted
	r.JSON(t, &a)
	require.Equal(t, "/v1/turns/"+a.TurnID, r.Header.Get("Location"))
	return a
}
