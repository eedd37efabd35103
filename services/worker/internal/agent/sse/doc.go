// Package sse reads Server-Sent Events streams from upstreams (OpenAI-compatible APIs, HTTP agents),
// with a bound on the size of one event so a misbehaving upstream cannot exhaust memory. A stream
// that ends inside an event reports io.ErrUnexpectedEOF, which the upstream classifier retries.
package sse
