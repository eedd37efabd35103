package sse

import (
	"io"
	"strings"
	"testing"
)

// chunkedReader gives one event per Read, as an HTTP/2 body gives a model's stream: the data that
// arrived since the last read.
type chunkedReader struct {
	event string
	left  int
	off   int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.event[c.off:])
	if c.off += n; c.off == len(c.event) {
		c.off = 0
		c.left--
	}
	return n, nil
}

// BenchmarkReader reads events the size of a model's streamed chunk (about 200 bytes), one per
// read of the underlying stream.
func BenchmarkReader(b *testing.B) {
	event := "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("x", 40) + "\"},\"finish_reason\":null}]}\n\n"
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	r := NewReader(&chunkedReader{event: event, left: b.N}, 0)
	b.ResetTimer()
	for range b.N {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
