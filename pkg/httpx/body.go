package httpx

import (
	"io"
	"net/http"
)

// LimitBody is http.MaxBytesReader over r's body, except that a request whose Content-Length
// already says the body is over limit reads nothing: its first Read fails with the
// *http.MaxBytesError reading past limit would have given, and the answer closes the connection.
//
// Refusing before the first Read matters for a client that sends Expect: 100-continue (curl does
// for large bodies; Go's Transport with ExpectContinueTimeout): the server sends "100 Continue" at
// the handler's first Read, so a handler that reads up to the limit invites the whole body, answers
// 413 while the client is still sending it, and closes a connection holding unread data, which
// resets it under the client, which may then report the reset (curl: "Send failure: Connection
// reset by peer") instead of the 413. Refused before any Read, the client gets its final 413 in
// place of the 100 and sends no body. A body without Content-Length (chunked) is limited as it is
// read.
func LimitBody(w http.ResponseWriter, r *http.Request, limit int64) io.ReadCloser {
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return declaredTooLarge{limit: limit}
	}
	return http.MaxBytesReader(w, r.Body, limit)
}

type declaredTooLarge struct{ limit int64 }

func (d declaredTooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: d.limit} }
func (declaredTooLarge) Close() error               { return nil }
