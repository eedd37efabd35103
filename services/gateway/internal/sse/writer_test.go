package sse

import (
	"io"
	"testing"
)

// BenchmarkEventWriter measures the SSE write path per event: it should not allocate once the
// stream's scratch buffer has grown to the event size.
func BenchmarkEventWriter(b *testing.B) {
	ew := newEventWriter(io.Discard)
	data := `{"turn_id":"0193c9a4-7a51-7c3e-9f1e-2b4b5d2a9e11","attempt":1,"index":42,"text":"hello "}`
	b.ReportAllocs()
	for b.Loop() {
		ew.event("k3f9ab12cd:1732881234567-0", "turn.delta", data)
	}
}

func TestEventWriterFrames(t *testing.T) {
	var out []byte
	w := writerFunc(func(p []byte) (int, error) { out = append(out, p...); return len(p), nil })
	ew := newEventWriter(w)
	ew.retry(1500)
	ew.event("e:1-0", "turn.delta", "a\nb")
	ew.comment("keep-alive")
	want := "retry: 1500\n\nid: e:1-0\nevent: turn.delta\ndata: a\ndata: b\n\n: keep-alive\n\n"
	if string(out) != want {
		t.Fatalf("frames:\n%q\nwant\n%q", out, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
