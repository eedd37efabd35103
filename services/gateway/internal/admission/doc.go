// Package admission decides whether this gateway replica takes one more stream: the replica's cap
// on open streams, one session's cap, and one tenant's share of the replica's cap (so one tenant
// cannot leave the others no slot). A refused stream is answered inside a 200 with a retry hint by
// package sse, as anything retryable is.
//
// It counts admitted streams only; tracking them (drain, cut, wait) is pkg/lifecycle's Streams,
// and parking them pkg/park's.
package admission
