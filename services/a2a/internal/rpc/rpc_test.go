package rpc

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

func TestCheckParams(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, params string
		ok             bool
	}{
		{"message/send", `{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}`, true},
		{"message/send", `"x"`, false},
		{"message/send", `{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}`, false},
		{"message/stream", `{"message":{"messageId":"m","role":"user","parts":[]}}`, false},
		{"tasks/get", `{"id":"t"}`, true},
		{"tasks/get", `{"id":7}`, false},
		{"tasks/cancel", ``, false},
		{"agent/getAuthenticatedExtendedCard", ``, true},
	} {
		err := checkParams(c.method, json.RawMessage(c.params))
		if c.ok {
			require.NoError(t, err, "%s %s", c.method, c.params)
		} else {
			require.ErrorIs(t, err, a2a.ErrInvalidParams, "%s %s", c.method, c.params)
		}
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{``: true, `null`: true, `"a"`: true, `7`: true, `1.5`: true, `{}`: false, `[1]`: false, `true`: false} {
		require.Equal(t, ok, validID(json.RawMessage(id)), id)
	}
}

// TestWriterIDs checks that the writer replaces the SDK's SSE ids with the call's, in order, and
// writes none for an event without one.
func TestWriterIDs(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	call := tasks.NewCall("", "")
	wr := newWriter(rec, call, true, time.Hour, time.Second)
	wr.Header().Set("Content-Type", "text/event-stream")
	wr.WriteHeader(http.StatusOK)
	queue(call, "0", "ep:1-0", "")
	for range 3 {
		_, _ = wr.Write([]byte("id: random-uuid\n"))
		_, _ = wr.Write([]byte("data: {}\n\n"))
		wr.Flush()
	}
	wr.finish(nil)
	require.Equal(t, "id: 0\ndata: {}\n\nid: ep:1-0\ndata: {}\n\ndata: {}\n\n", rec.Body.String())
}

// TestWriterRefusal checks that a refusal asked for before the first byte becomes the HTTP status
// with Retry-After and the JSON-RPC error as a plain JSON body.
func TestWriterRefusal(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	call := tasks.NewCall("", "")
	wr := newWriter(rec, call, true, time.Hour, time.Second)
	wr.Header().Set("Content-Type", "text/event-stream")
	wr.WriteHeader(http.StatusOK)
	refuseForTest(call, http.StatusTooManyRequests, 3*time.Second)
	_, _ = wr.Write([]byte("id: x\n"))
	_, _ = wr.Write([]byte(`data: {"error":{"code":-32000}}` + "\n\n"))
	wr.finish(nil)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "3", rec.Header().Get("Retry-After"))
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"error":{"code":-32000}}`, rec.Body.String())
}

func queue(c *tasks.Call, ids ...string) {
	for _, id := range ids {
		c.Tag(id)
	}
}

func refuseForTest(c *tasks.Call, status int, retry time.Duration) { c.Refuse(status, retry) }

// TestMisdirected: in region euw1, a request naming a task of another region (by shape) or a
// context of a mapped region is answered 421 with JSON-RPC error -32051 naming the owner, before
// the SDK (here: no handler at all) sees it; everything else passes.
func TestMisdirected(t *testing.T) {
	t.Parallel()
	m, err := region.Parse([]byte(`{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}]}`))
	require.NoError(t, err)
	place := region.Local{Code: "euw1", Map: m}
	const u = "0192f0c4-5d3c-7b7e-8a6f-1c2d3e4f5a6b"
	msg := func(extra string) string {
		return `{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]` + extra + `}}`
	}
	for _, c := range []struct {
		method, params, owner string
	}{
		{"tasks/get", `{"id":"use1-` + u + `"}`, "use1"},
		{"tasks/cancel", `{"id":"apse2-` + u + `"}`, "apse2"},
		{"tasks/resubscribe", `{"id":"use1-` + u + `"}`, "use1"},
		{"message/send", msg(`,"taskId":"use1-` + u + `"`), "use1"},
		{"message/stream", msg(`,"contextId":"use1-chat"`), "use1"},
		{"tasks/get", `{"id":"euw1-` + u + `"}`, ""},
		{"tasks/get", `{"id":"` + u + `"}`, ""},
		{"message/send", msg(`,"contextId":"user-42"`), ""},
		{"message/send", msg(``), ""},
	} {
		owner, ok := misdirected(place, c.method, json.RawMessage(c.params))
		require.Equal(t, c.owner != "", ok, "%s %s", c.method, c.params)
		require.Equal(t, c.owner, owner)
		_, ok = misdirected(region.Local{}, c.method, json.RawMessage(c.params))
		require.False(t, ok, "single-region mode checks nothing")
	}

	rec := httptest.NewRecorder()
	writeMisdirected(rec, json.RawMessage(`7`), tasks.NewCall("", ""), "use1")
	require.Equal(t, http.StatusMisdirectedRequest, rec.Code)
	var resp struct {
		ID    int `json:"id"`
		Error struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	require.Equal(t, 7, resp.ID)
	require.Equal(t, region.RPCMisdirected, resp.Error.Code)
	require.Equal(t, "use1", resp.Error.Data["region"])
}

// TestMisdirectedNotification: a notification naming another region's task gets the 421 a
// router goes by, but no body: JSON-RPC 2.0 answers no notification.
func TestMisdirectedNotification(t *testing.T) {
	t.Parallel()
	m, err := region.Parse([]byte(`{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}]}`))
	require.NoError(t, err)
	h := tasks.New(frontdoor.New(frontdoor.Config{IntakeURL: "http://127.0.0.1:1", GatewayURL: "http://127.0.0.1:1"}), tasks.Config{}, slog.New(slog.DiscardHandler))
	s := New(Config{Region: region.Local{Code: "euw1", Map: m}}, h, nil, prometheus.NewRegistry())
	const u = "0192f0c4-5d3c-7b7e-8a6f-1c2d3e4f5a6b"
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"tasks/cancel","params":{"id":"use1-` + u + `"}}`:        "",
		`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"id":"use1-` + u + `"}}`: `"id":3`,
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body)))
		require.Equal(t, http.StatusMisdirectedRequest, rec.Code, body)
		if want == "" {
			require.Empty(t, rec.Body.String())
		} else {
			require.Contains(t, rec.Body.String(), want)
		}
	}
}
