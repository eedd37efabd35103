// Package park keeps idle long-lived streams cheap: a stream that has nothing to write holds no
// goroutine, only its state, and is woken when it must act.
//
// A Lot holds the streams of one server (the gateway's event streams). Enter admits a stream with
// its step function, which acts on the events it is woken for; Run opens it and serves it. A stream
// on a taken-over (hijacked HTTP/1.x) connection parks between wakes: whatever needs it to act —
// its owner's feed, the lot's keep-alive wheel, a drain, Config.Signal, the poller noticing its
// client leave — calls Wake, and a wake of a parked stream starts one short-lived goroutine that
// calls step and parks it again; a wake while it runs makes it go round once more, so at most one
// goroutine runs a stream and no wake is lost. A stream that cannot be taken over (HTTP/2) runs on
// its handler's goroutine, woken the same way.
//
// The lot's own goroutines run while it holds streams: the keep-alive wheel (up to 256 slots about
// 50 ms apart, so every stream is woken for a keep-alive each KeepAlive and they are spread over
// it in small groups), which also passes on Config.Signal; and on Linux one goroutine in
// epoll_wait on every taken-over socket (EPOLLIN|EPOLLRDHUP, one-shot, each registration with a
// token of its own and removed before its socket closes), so a departed client's slot is released
// at once; elsewhere, or where epoll fails, a goroutine per stream blocked in a 1-byte read.
//
// What a stream writes, when it ends and what it answers are its owner's; so are its tracking
// (pkg/lifecycle's Streams) and its admission.
package park
