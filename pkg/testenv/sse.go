package testenv

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-run/turnstile/pkg/sse"
)

// Event is one parsed SSE event: its ID is the stream's last event ID when it was dispatched.
type Event = sse.Event

// SSEStream reads events from an open SSE response.
type SSEStream struct {
	Resp   *http.Response
	cancel context.CancelFunc
	events chan Event
}

// OpenSSE opens url with an optional Last-Event-ID header and starts parsing. The stream is closed
// at test cleanup.
func OpenSSE(t testing.TB, url, lastEventID string) *SSEStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the body belongs to the stream; Close (at cleanup) closes it
	if err != nil {
		cancel()
		t.Fatalf("open %s: %v", url, err)
	}
	s := &SSEStream{Resp: resp, cancel: cancel, events: make(chan Event, 4096)}
	go s.read(ctx)
	t.Cleanup(s.Close)
	return s
}

// read parses the body until it ends or Close cancels the stream, so Close always ends it.
func (s *SSEStream) read(ctx context.Context) {
	defer close(s.events)
	r := sse.NewReader(s.Resp.Body, 0)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		select {
		case s.events <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// Next returns the next event, failing the test after timeout. ok is false when the stream ended.
func (s *SSEStream) Next(t testing.TB, timeout time.Duration) (Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no SSE event within %v", timeout)
		return Event{}, false
	}
}

// Until reads events until stop returns true for one (included) and returns them all.
func (s *SSEStream) Until(t testing.TB, timeout time.Duration, stop func(Event) bool) []Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var out []Event
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			t.Fatalf("stream did not reach its stop condition within %v; got %d events: %s", timeout, len(out), summarize(out))
		}
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended before its stop condition; got %d events: %s", len(out), summarize(out))
			}
			out = append(out, ev)
			if stop(ev) {
				return out
			}
		case <-time.After(remaining):
		}
	}
}

// UntilEnd reads events until stop returns true for one (included) or the server ends the stream,
// and returns them and whether stop was reached: a client that resumes whenever the stream ends, as
// a browser's EventSource does, reads this way. It fails the test only after timeout.
func (s *SSEStream) UntilEnd(t testing.TB, timeout time.Duration, stop func(Event) bool) ([]Event, bool) {
	t.Helper()
	deadline := time.After(timeout)
	var out []Event
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out, false
			}
			out = append(out, ev)
			if stop(ev) {
				return out, true
			}
		case <-deadline:
			t.Fatalf("stream neither reached its stop condition nor ended within %v; got %d events: %s", timeout, len(out), summarize(out))
		}
	}
}

// Ended waits for the server to end the stream and returns any events sent before the end.
func (s *SSEStream) Ended(t testing.TB, timeout time.Duration) []Event {
	t.Helper()
	var out []Event
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("stream did not end within %v", timeout)
		}
	}
}

// Close ends the stream.
func (s *SSEStream) Close() {
	s.cancel()
	_ = s.Resp.Body.Close()
}

func summarize(evs []Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s", e.Type)
	}
	return b.String()
}
