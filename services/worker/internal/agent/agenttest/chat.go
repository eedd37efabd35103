package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// ChatAnswer is what a ChatServer streams for one request.
type ChatAnswer struct {
	// Words are sent as content deltas, one chunk each.
	Words []string
	// Error, when set, is an error object ({"message": …, "type": …, "code": …}) sent after Words
	// as a data line of its own, the way OpenAI and compatible servers report an error once the
	// stream has begun; the stream then ends without [DONE].
	Error string
	// Status, when set, answers with this HTTP status instead of a stream: the body is
	// {"error": Error} and RetryAfter, when set, its Retry-After header.
	Status     int
	RetryAfter string
}

// ChatServer is an OpenAI-compatible chat completions server (POST /v1/chat/completions with
// "stream": true, answered as server-sent chat.completion.chunk events and [DONE]) that plays one
// answer per request and counts the requests. Its URL plus "/v1" is an agent's base URL.
type ChatServer struct {
	URL      string
	answer   func(n int) ChatAnswer
	requests atomic.Int64
}

// NewChatServer starts a server whose n-th request (from 1) is answered with answer(n); it is
// closed when the test ends.
func NewChatServer(t testing.TB, answer func(n int) ChatAnswer) *ChatServer {
	s := &ChatServer{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests counts the requests the server received.
func (s *ChatServer) Requests() int { return int(s.requests.Load()) }

func (s *ChatServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	a := s.answer(int(s.requests.Add(1)))
	if a.Status != 0 {
		if a.RetryAfter != "" {
			w.Header().Set("Retry-After", a.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.Status)
		_, _ = fmt.Fprintf(w, `{"error":%s}`, a.Error)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(data string) {
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		if fl != nil {
			fl.Flush()
		}
	}
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	send(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	for _, word := range a.Words {
		b, _ := json.Marshal(word)
		send(head + `{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`)
	}
	if a.Error != "" {
		send(`{"error":` + a.Error + `}`)
		return
	}
	send(head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	send("[DONE]")
}
