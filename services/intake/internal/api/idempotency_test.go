package api

import (
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// TestIdempotentRetries sends one POST five times at once with one Idempotency-Key: every answer is
// the same 202 body, every record carries the same turn ID; the same key with another body is a 422.
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
		require.Equal(t, httpx.ProblemIdempotencyReuse.Name, resp.ProblemType(t))
		require.Equal(t, before, b.recordsInKafka(t))
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
