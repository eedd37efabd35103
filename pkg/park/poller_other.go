//go:build !linux

package park

// newPoller returns the portable poller: without epoll, a reader goroutine per connection.
func newPoller() (poller, error) { return newReaderPoller(), nil }
