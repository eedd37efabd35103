package chat

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

func TestReadRequest(t *testing.T) {
	t.Parallel()
	const user = `{"id":"m1","role":"user","parts":[{"type":"text","text":"hel"},{"type":"file","url":"x"},{"type":"text","text":"lo"}]}`
	read := func(body, pathID string, header ...string) (turn, *httpx.Problem) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return readRequest(httptest.NewRecorder(), r, pathID, "", 1024)
	}

	t.Run("DefaultChatTransportBody", func(t *testing.T) {
		t.Parallel()
		got, p := read(`{"id":"c1","messages":[{"id":"a0","role":"assistant","parts":[]},`+user+`],"trigger":"submit-message","messageId":null,
			"metadata":{"demo":{"tokens":3}},"multitask":"reject"}`, "")
		require.Nil(t, p)
		require.Equal(t, "c1", got.chatID)
		require.Equal(t, "hello", got.text, "the last message's text parts, joined")
		require.Equal(t, "reject", got.multitask)
		require.Equal(t, map[string]any{"tokens": float64(3)}, got.metadata["demo"])
		require.Equal(t, "aisdk:m1", got.idempotencyKey())
	})

	t.Run("PathID", func(t *testing.T) {
		t.Parallel()
		got, p := read(`{"messages":[`+user+`]}`, "c2")
		require.Nil(t, p)
		require.Equal(t, "c2", got.chatID)
		_, p = read(`{"id":"other","messages":[`+user+`]}`, "c2")
		require.Equal(t, httpx.ProblemValidation.Name, p.Type)
	})

	t.Run("RegenerateHasNoKey", func(t *testing.T) {
		t.Parallel()
		got, p := read(`{"id":"c1","messages":[`+user+`],"trigger":"regenerate-message","messageId":"a1"}`, "")
		require.Nil(t, p)
		require.Empty(t, got.idempotencyKey(), "a regenerate asks for a new turn")
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for name, c := range map[string]struct {
			body string
			want httpx.ProblemType
		}{
			"NotJSON":        {`{`, httpx.ProblemInvalidBody},
			"TooLarge":       {`{"id":"c1","messages":[` + user + `],"x":"` + strings.Repeat("a", 2000) + `"}`, httpx.ProblemBodyTooLarge},
			"NoChatID":       {`{"messages":[` + user + `]}`, httpx.ProblemInvalidSession},
			"DotChatID":      {`{"id":"..","messages":[` + user + `]}`, httpx.ProblemInvalidSession},
			"BadChatID":      {`{"id":"a/b","messages":[` + user + `]}`, httpx.ProblemInvalidSession},
			"NoMessages":     {`{"id":"c1","messages":[]}`, httpx.ProblemValidation},
			"LastNotUser":    {`{"id":"c1","messages":[{"id":"a","role":"assistant","parts":[{"type":"text","text":"x"}]}]}`, httpx.ProblemValidation},
			"NoText":         {`{"id":"c1","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"  "}]}]}`, httpx.ProblemValidation},
			"UnknownTrigger": {`{"id":"c1","messages":[` + user + `],"trigger":"other"}`, httpx.ProblemValidation},
		} {
			_, p := read(c.body, "")
			require.NotNil(t, p, name)
			require.Equal(t, c.want.Name, p.Type, name)
			require.Equal(t, c.want.Status, p.Status, name)
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "text/plain")
		_, p := readRequest(httptest.NewRecorder(), r, "", "", 1024)
		require.Equal(t, httpx.ProblemUnsupportedType.Name, p.Type)
	})
}

// TestTooLargeBodyWithContinue: a client that announces a 20 MB body with Expect: 100-continue
// gets a final 413 problem with Connection: close in place of the 100, so it never sends the body
// into a connection the server closes after answering (which resets it under the client: the run
// saw curl report "Send failure: Connection reset by peer" and no status). A body without a
// Content-Length is still cut at the limit as it is read.
func TestTooLargeBodyWithContinue(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p := readRequest(w, r, "", "", MaxBodyDefault); p != nil {
			httpx.WriteProblem(w, *p)
		}
	}))
	defer srv.Close()

	t.Run("Declared", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", 20<<20)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "a final status must arrive before any body is sent")
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "no 100 Continue first")
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.True(t, resp.Close, "the connection is not reused: %v", resp.Header)
	})
	t.Run("Chunked", func(t *testing.T) {
		resp, err := http.Post(srv.URL, "application/json", io.MultiReader(strings.NewReader(`{"x":"`), bytes.NewReader(bytes.Repeat([]byte("a"), 2*MaxBodyDefault))))
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
}
