package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

// readAll reads every event of body and the error that ended the stream.
func readAll(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		want []Event
		end  error
	}{
		{name: "Empty", body: "", end: io.EOF},
		{
			name: "GatewayStream",
			body: "retry: 1000\n\n: keep-alive\n\nid: e1:1-0\nevent: turn.started\ndata: {\"a\":1}\n\n" +
				"event: turn.delta\ndata: line1\ndata: line2\n\nevent: empty\n\n",
			want: []Event{
				{ID: "e1:1-0", Type: "turn.started", Data: `{"a":1}`},
				{ID: "e1:1-0", Type: "turn.delta", Data: "line1\nline2"},
			},
			end: io.EOF,
		},
		{name: "DefaultTypeIsMessage", body: "data: x\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "EmptyEventTypeIsMessage", body: "event:\ndata: x\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "EventWithoutDataIsDropped", body: "event: ping\n\ndata: x\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "EmptyDataLineDispatches", body: "data\n\ndata:\n\n", want: []Event{{Type: "message"}, {Type: "message"}}, end: io.EOF},
		{name: "TwoEmptyDataLines", body: "data:\ndata:\n\n", want: []Event{{Type: "message", Data: "\n"}}, end: io.EOF},
		{name: "OneLeadingSpaceStripped", body: "data:  two\ndata:none\n\n", want: []Event{{Type: "message", Data: " two\nnone"}}, end: io.EOF},
		{name: "ColonInValue", body: "data: a: b\n\n", want: []Event{{Type: "message", Data: "a: b"}}, end: io.EOF},
		{name: "FieldNamesAreExact", body: "Data: x\ndata : y\nevent: e\ndata: z\n\n", want: []Event{{Type: "e", Data: "z"}}, end: io.EOF},
		{name: "CommentsIgnored", body: ":\n: c\ndata: x\n:data: y\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "UnknownFieldsIgnored", body: "foo: bar\ndata: x\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "CRLineEnds", body: "data: a\rdata: b\r\r", want: []Event{{Type: "message", Data: "a\nb"}}, end: io.EOF},
		{name: "CRLFLineEnds", body: "data: a\r\ndata: b\r\n\r\n", want: []Event{{Type: "message", Data: "a\nb"}}, end: io.EOF},
		{name: "MixedLineEnds", body: "data: a\r\rdata: b\n\r\ndata: c\r\n\n", want: []Event{
			{Type: "message", Data: "a"}, {Type: "message", Data: "b"}, {Type: "message", Data: "c"},
		}, end: io.EOF},
		{name: "LeadingBOMSkipped", body: "\uFEFFdata: x\n\n", want: []Event{{Type: "message", Data: "x"}}, end: io.EOF},
		{name: "SecondBOMKept", body: "\uFEFF\uFEFFdata: x\n\ndata: y\n\n", want: []Event{{Type: "message", Data: "y"}}, end: io.EOF},
		{name: "IDCarriesOver", body: "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []Event{
			{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"}, {Type: "message", Data: "c"},
		}, end: io.EOF},
		{name: "IDOfDroppedEventKept", body: "id: 7\n\ndata: a\n\n", want: []Event{{ID: "7", Type: "message", Data: "a"}}, end: io.EOF},
		{name: "IDWithNULIgnored", body: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []Event{
			{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"},
		}, end: io.EOF},
		{name: "InvalidUTF8Replaced", body: "data: a\xffb\xe2\x82c\n\n", want: []Event{{Type: "message", Data: "a\uFFFDb\uFFFDc"}}, end: io.EOF},
		{name: "CutInsideEvent", body: "data: a\n\nevent: x\ndata: b\n", want: []Event{{Type: "message", Data: "a"}}, end: io.ErrUnexpectedEOF},
		{name: "CutInsideLine", body: "data: a\n\ndata: b", want: []Event{{Type: "message", Data: "a"}}, end: io.ErrUnexpectedEOF},
		{name: "CutAfterEventField", body: "event: x\n", end: io.ErrUnexpectedEOF},
		{name: "EndAfterComment", body: ": bye\n", end: io.EOF},
		{name: "EndAfterRetry", body: "data: a\n\nretry: 5\n\n", want: []Event{{Type: "message", Data: "a"}}, end: io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for name, body := range map[string]io.Reader{
				"Whole":       strings.NewReader(tc.body),
				"ByteAtATime": iotest.OneByteReader(strings.NewReader(tc.body)),
			} {
				got, err := readAll(NewReader(body, 0))
				require.Equal(t, tc.want, got, name)
				require.ErrorIs(t, err, tc.end, name)
			}
		})
	}
}

func TestReaderRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		want time.Duration
		ok   bool
	}{
		{name: "Digits", body: "retry: 1500\n\n", want: 1500 * time.Millisecond, ok: true},
		{name: "Zero", body: "retry: 0\n\n", want: 0, ok: true},
		{name: "LaterWins", body: "retry: 10\nretry: 20\n\n", want: 20 * time.Millisecond, ok: true},
		{name: "NonDigitsIgnored", body: "retry: 10\nretry: 1.5\nretry: -1\nretry: 2s\nretry:  3\n\n", want: 10 * time.Millisecond, ok: true},
		{name: "EmptyIgnored", body: "retry:\n\n"},
		{name: "HugeSaturates", body: "retry: 99999999999999999999999\n\n", want: time.Duration(1<<63 - 1), ok: true},
		{name: "None", body: "data: x\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(strings.NewReader(tc.body), 0)
			_, _ = readAll(r)
			got, ok := r.Retry()
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReaderLimits(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, DefaultMaxBytes, NewReader(strings.NewReader(""), 0).MaxBytes())
		require.Equal(t, 10, NewReader(strings.NewReader(""), 10).MaxBytes())
	})
	t.Run("AtTheLimit", func(t *testing.T) {
		t.Parallel()
		// A 10-byte line and 10 bytes of data (two lines joined) are within a limit of 10.
		got, err := readAll(NewReader(strings.NewReader("data:12345\ndata:6789\n\n"), 10))
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, []Event{{Type: "message", Data: "12345\n6789"}}, got)
	})
	t.Run("LineTooLong", func(t *testing.T) {
		t.Parallel()
		r := NewReader(strings.NewReader(": "+strings.Repeat("x", 100)+"\ndata: x\n\n"), 64)
		_, err := r.Next()
		require.ErrorIs(t, err, ErrTooLarge)
		require.Contains(t, err.Error(), "a line is longer than 64 bytes")
		_, again := r.Next()
		require.Equal(t, err, again, "the error is sticky")
	})
	t.Run("LineTooLongWithoutEnd", func(t *testing.T) {
		t.Parallel()
		_, err := NewReader(iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 100))), 64).Next()
		require.ErrorIs(t, err, ErrTooLarge)
	})
	t.Run("DataTooLong", func(t *testing.T) {
		t.Parallel()
		body := strings.Repeat("data: 0123456789\n", 10) + "\n"
		_, err := NewReader(strings.NewReader(body), 64).Next()
		require.ErrorIs(t, err, ErrTooLarge)
		require.Contains(t, err.Error(), "an event's data is longer than 64 bytes")
	})
}

func TestReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
	ev, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, "a", ev.Data)
	_, err = r.Next()
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, io.EOF)
}

func TestReaderLastEventID(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("id: 1\ndata: a\n\nid: 2\n\n"), 0)
	_, _ = readAll(r)
	require.Equal(t, "2", r.LastEventID())
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "Valid", in: "aé€😀", want: "aé€😀"},
		{name: "LoneContinuation", in: "a\x80b", want: "a\uFFFDb"},
		{name: "TruncatedThreeByte", in: "\xe2\x82", want: "\uFFFD"},
		{name: "TruncatedThenASCII", in: "\xe2\x82A", want: "\uFFFDA"},
		{name: "Overlong", in: "\xc0\xaf", want: "\uFFFD\uFFFD"},
		{name: "Surrogate", in: "\xed\xa0\x80", want: "\uFFFD\uFFFD\uFFFD"},
		{name: "AboveMax", in: "\xf4\x90\x80\x80", want: "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{name: "TruncatedFourByte", in: "\xf0\x9f\x98", want: "\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, decode([]byte(tc.in)))
		})
	}
}
