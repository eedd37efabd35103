// Package sse parses Server-Sent Events streams (text/event-stream) by the WHATWG HTML standard's
// event stream interpretation rules, so every client in turnstile reads a stream the way a
// browser's EventSource does: the worker reading OpenAI-compatible and HTTP agents, the test
// environment reading the gateway, and the load generator checking the gateway's streams.
//
// The rules it follows:
//
//   - Lines end with CRLF, LF or CR alone; one byte order mark at the start of the stream is
//     skipped; bytes that are not UTF-8 become U+FFFD as the standard's UTF-8 decode makes them.
//   - A line starting with a colon is a comment. Otherwise the field name runs up to the first
//     colon (or is the whole line, with an empty value) and one space after the colon is dropped.
//   - data lines are joined with "\n"; event sets the type (dispatched as "message" when unset or
//     empty); id sets the last event ID unless it contains NUL, and the ID carries over to later
//     events until the next id; retry is honoured only when it is ASCII digits; other fields are
//     ignored.
//   - A blank line dispatches the event, unless no data line came since the last dispatch: then the
//     event is dropped (its type too), though an id it carried stays.
//
// A stream is untrusted input, so a Reader bounds one line and one event's data (MaxBytes,
// ErrTooLarge). A stream that ends inside an event, which the standard discards silently, is
// reported as io.ErrUnexpectedEOF, so a caller can tell a cut stream from one that ended cleanly
// (io.EOF).
//
// The gateway's writer is separate code (services/gateway/internal/sse), so a framing bug on the
// writing side shows up as a failure of the readers' tests instead of cancelling out.
package sse
