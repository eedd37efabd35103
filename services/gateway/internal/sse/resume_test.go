package sse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

const wait = 30 * time.Second

func TestResume(t *testing.T) {
	t.Parallel()

	t.Run("ExclusiveOfCursor", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		session, turn := newSession(), newTurn()
		cursors := f.publish(session, turn, 0, 10, true, "")

		for _, at := range []int{0, 4, 8} {
			s := testenv.OpenSSE(t, gw.url(session), cursors[at].String())
			require.Equal(t, http.StatusOK, s.Resp.StatusCode)
			got := s.Until(t, wait, isIndex(9))
			require.Equal(t, seq(at+1, 10), indexes(t, got), "replay starts right after the cursor")
			require.Equal(t, cursors[at+1].String(), got[0].ID)
			s.Close()
		}
	})

	t.Run("WithoutConnectionTakeover", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{}, noTakeover)
		session, turn := newSession(), newTurn()
		cursors := f.publish(session, turn, 0, 5, false, "")
		s := testenv.OpenSSE(t, gw.url(session), cursors[1].String())
		require.Equal(t, "", s.Resp.Header.Get("Connection"), "served by net/http, not a taken-over connection")
		require.Equal(t, seq(2, 5), indexes(t, s.Until(t, wait, isIndex(4))))
		f.publish(session, turn, 5, 3, true, "")
		require.Equal(t, seq(5, 8), indexes(t, s.Until(t, wait, isIndex(7))))
		gw.handler.Cut()
		require.Empty(t, s.Ended(t, wait))
	})

	t.Run("HeaderWinsOverQuery", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		session, turn := newSession(), newTurn()
		cursors := f.publish(session, turn, 0, 6, true, "")
		// The query holds a stale cursor, as EventSource re-sends its original URL.
		s := testenv.OpenSSE(t, gw.url(session)+"?last_event_id="+cursors[0].String(), cursors[3].String())
		require.Equal(t, seq(4, 6), indexes(t, s.Until(t, wait, isIndex(5))))
		q := testenv.OpenSSE(t, gw.url(session)+"?last_event_id="+cursors[1].String(), "")
		require.Equal(t, seq(2, 6), indexes(t, q.Until(t, wait, isIndex(5))))
	})

	t.Run("LiveOnly", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		session, turn := newSession(), newTurn()
		f.publish(session, turn, 0, 5, false, "")
		opened := gw.opens(t)
		s := testenv.OpenSSE(t, gw.url(session)+"?last_event_id=$", "")
		require.Equal(t, "live", opened(), "the entries go in only after the open read the stream's state")
		f.publish(session, turn, 5, 3, true, "")
		require.Equal(t, seq(5, 8), indexes(t, s.Until(t, wait, isIndex(7))))
	})

	// Clients join at every point of a stream that is being written: each receives exactly the
	// events after its cursor, in order, whether they came from replay or from the live feed. A
	// client that falls more than the hub's buffer behind the publisher (the first one, while it
	// opens the others, on a loaded machine) is ended as too slow and resumes from its last event,
	// as EventSource does; what it receives across the resumes is held to the same rule.
	t.Run("LiveJoinNoGapNoDuplicate", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		session, turn := newSession(), newTurn()
		const total = 400
		first := testenv.OpenSSE(t, gw.url(session), "")
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.publish(session, turn, 0, total, true, "")
		}()
		type joined struct {
			at     int
			cursor string
			s      *testenv.SSEStream
		}
		var joins []joined
		last := ""
		for n := 0; n < total; {
			ev, ok := first.Next(t, wait)
			if !ok {
				first = testenv.OpenSSE(t, gw.url(session), last)
				continue
			}
			last = ev.ID
			idx := indexes(t, []testenv.Event{ev})[0]
			require.Equal(t, n, idx)
			if n%23 == 0 {
				joins = append(joins, joined{at: n, cursor: ev.ID, s: testenv.OpenSSE(t, gw.url(session), ev.ID)})
			}
			n++
		}
		<-done
		require.NotEmpty(t, joins)
		for _, j := range joins {
			var got []testenv.Event
			for s, cursor := j.s, j.cursor; ; s = testenv.OpenSSE(t, gw.url(session), cursor) {
				evs, reached := s.UntilEnd(t, wait, isIndex(total-1))
				got = append(got, evs...)
				if reached {
					break
				}
				if len(evs) > 0 {
					cursor = evs[len(evs)-1].ID
				}
			}
			require.Equal(t, seq(j.at+1, total), indexes(t, got), "joined after %d", j.at)
		}
	})

	t.Run("TurnFilterEndsAndThen204", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		session, a, b := newSession(), newTurn(), newTurn()
		f.publish(session, a, 0, 3, true, "")
		f.publish(session, b, 100, 3, true, "")
		s := testenv.OpenSSE(t, gw.url(session)+"?turn_id="+b, "")
		got := s.Ended(t, wait)
		require.Equal(t, []int{100, 101, 102}, indexes(t, got), "only turn b, ending at its terminal event")
		again := testenv.OpenSSE(t, gw.url(session)+"?turn_id="+b, got[len(got)-1].ID)
		require.Equal(t, http.StatusNoContent, again.Resp.StatusCode)
	})

	t.Run("MalformedCursorIs400", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		for _, bad := range []string{"garbage", "abc:1-", "ABC:1-0", ":1-0", "abc:01-0", "abc:1-0-0", "abc:-1-0"} {
			req, _ := http.NewRequest(http.MethodGet, gw.url(newSession()), nil)
			req.Header.Set("Last-Event-ID", bad)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			var p map[string]any
			require.NoError(t, json.Unmarshal(body, &p))
			require.Equal(t, "https://turnstile.dev/problems/invalid-cursor", p["type"])
		}
		resp, err := http.Get(gw.url(newSession()) + "?last_event_id=nope")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})
}

func TestReset(t *testing.T) {
	t.Parallel()

	t.Run("AfterTrimming", func(t *testing.T) {
		t.Parallel()
		// The publisher's own approximate MAXLEN trims whole macro-nodes (100 entries by default).
		f := setup(t, 10)
		gw := f.replica(sse.Config{})
		session, turn := newSession(), newTurn()
		cursors := f.publish(session, turn, 0, 400, true, "")
		st, err := f.reader.State(context.Background(), key(session))
		require.NoError(t, err)
		require.True(t, st.HasFirst)
		require.NotEqual(t, cursors[0].ID, st.FirstID, "the publisher trimmed")
		oldest, err := f.rdb.XRangeN(context.Background(), streams.KeysFor(f.prefix, key(session)).Events, "-", "+", 1).Result()
		require.NoError(t, err)
		firstKept := indexOf(t, cursors, oldest[0].ID)

		s := testenv.OpenSSE(t, gw.url(session), cursors[0].String())
		got := s.Until(t, wait, isIndex(399))
		require.Equal(t, "stream.reset", got[0].Type)
		require.Contains(t, got[0].Data, `"history_trimmed"`)
		require.Equal(t, cursors[0].Epoch+":0-0", got[0].ID, "after a reset the client resumes from the generation's start")
		require.Equal(t, seq(firstKept, 400), indexes(t, got), "then everything still retained")

		// A cursor at or after the newest trimmed entry loses nothing: no reset.
		s2 := testenv.OpenSSE(t, gw.url(session), cursors[firstKept-1].String())
		got2 := s2.Until(t, wait, isIndex(399))
		require.NotEqual(t, "stream.reset", got2[0].Type)
		require.Equal(t, seq(firstKept, 400), indexes(t, got2))
	})

	t.Run("AfterStreamKeyDeleted", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		gw := f.replica(sse.Config{})
		opened := gw.opens(t)
		session, turn := newSession(), newTurn()
		old := f.publish(session, turn, 0, 3, false, "")
		live := testenv.OpenSSE(t, gw.url(session), old[2].String())
		require.Equal(t, "resumed", opened(), "the key goes only after the open read the stream's state")

		require.NoError(t, f.rdb.Del(context.Background(), streams.KeysFor(f.prefix, key(session)).Events).Err())
		fresh := f.publish(session, turn, 10, 2, true, "")
		require.NotEqual(t, old[0].Epoch, fresh[0].Epoch, "a lost stream starts a new epoch")
		// The live client must not receive new-generation entries under its old epoch: its stream ends.
		require.Empty(t, live.Ended(t, wait))

		s := testenv.OpenSSE(t, gw.url(session), old[2].String())
		got := s.Until(t, wait, isIndex(11))
		require.Equal(t, "stream.reset", got[0].Type)
		require.Contains(t, got[0].Data, `"epoch_changed"`)
		require.Equal(t, []int{10, 11}, indexes(t, got))
		require.Equal(t, fresh[0].String(), got[1].ID)
	})

	t.Run("FencesSurviveNewEpoch", func(t *testing.T) {
		t.Parallel()
		f := setup(t, 0)
		session, turn := newSession(), newTurn()
		ctx := context.Background()
		data := []byte(`{"turn_id":"x","attempt":2,"index":0}`)
		_, err := f.pub.Publish(ctx, key(session), turn, 5, wireDelta(data), "")
		require.NoError(t, err)
		require.NoError(t, f.rdb.Del(ctx, streams.KeysFor(f.prefix, key(session)).Events).Err())
		_, err = f.pub.Publish(ctx, key(session), turn, 4, wireDelta(data), "")
		require.ErrorIs(t, err, streams.ErrStaleToken, "losing the stream must not let a zombie attempt write")
	})
}

func indexOf(t *testing.T, cursors []streams.Cursor, id string) int {
	t.Helper()
	for i, c := range cursors {
		if c.ID.String() == id {
			return i
		}
	}
	t.Fatalf("entry %s not published", id)
	return -1
}

// TestIndependentClient checks the resume rules with an SSE client library that is not ours: it
// follows a session, the gateway cuts every stream several times mid-way, and the library's own
// reconnection (with its Last-Event-ID) yields every event once, in order.
func TestIndependentClient(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	opens := make(chan sse.OpenInfo, 64)
	gw := f.replica(sse.Config{})
	gw.handler.SetHooks(&sse.Hooks{OnOpen: func(i sse.OpenInfo) { opens <- i }})
	session, turn := newSession(), newTurn()
	const total = 300

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.url(session), nil)
	require.NoError(t, err)
	client := &gosse.Client{HTTPClient: http.DefaultClient, Backoff: gosse.Backoff{InitialInterval: 20 * time.Millisecond, MaxRetries: 0}}
	conn := client.NewConnection(req)
	var mu sync.Mutex
	var got []int
	var ids []string
	reached := make(chan int, total)
	conn.SubscribeToAll(func(e gosse.Event) {
		var p payload
		if json.Unmarshal([]byte(e.Data), &p) != nil {
			return
		}
		mu.Lock()
		got = append(got, p.Index)
		ids = append(ids, e.LastEventID)
		mu.Unlock()
		reached <- p.Index
	})
	connDone := make(chan error, 1)
	go func() { connDone <- conn.Connect() }()
	require.Equal(t, "", within(t, opens, wait, "stream open").CursorSource)

	cuts := 0
	published := 0
	for published < total {
		n := 50
		f.publish(session, turn, published, n, published+n == total, "")
		published += n
		// Wait until the client has the batch's middle, then cut mid-flow.
		for {
			if i := within(t, reached, wait, "event"); i >= published-n/2 || i == total-1 {
				break
			}
		}
		if published < total {
			gw.handler.Cut()
			cuts++
			info := within(t, opens, wait, "resumed stream open")
			require.Equal(t, "header", info.CursorSource, "the library resumes with Last-Event-ID")
			require.Equal(t, "resumed", info.Result)
		}
	}
	testenv.WaitFor(t, wait, "all events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= total
	})
	cancel()
	require.ErrorIs(t, within(t, connDone, wait, "client stop"), context.Canceled, "the client stops because the test cancelled it")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, seq(0, total), got, "every event exactly once, in order, across %d cuts", cuts)
	require.True(t, strings.HasPrefix(ids[0], ids[len(ids)-1][:strings.Index(ids[0], ":")+1]))
}
