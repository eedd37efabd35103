package park

import (
	"net"
	"sync"
)

// poller notices taken-over connections whose clients went away: anything readable or a hang-up
// calls the registration's gone function, once.
type poller interface {
	// add registers nc; gone is called at most once, from the poller's goroutine. The token
	// identifies this registration for remove.
	add(nc net.Conn, gone func()) (token uint64, err error)
	// remove deregisters nc; call it before closing nc.
	remove(nc net.Conn, token uint64)
	run()
	stop()
}

// readerPoller is the portable poller: a goroutine per connection blocked in a 1-byte read. The
// client sends nothing more on an event stream, so a read returning means it is gone.
type readerPoller struct {
	readers sync.WaitGroup
	done    chan struct{}
	once    sync.Once
}

func newReaderPoller() *readerPoller { return &readerPoller{done: make(chan struct{})} }

func (p *readerPoller) add(nc net.Conn, gone func()) (uint64, error) {
	p.readers.Add(1)
	go func() {
		defer p.readers.Done()
		var b [1]byte
		_, _ = nc.Read(b[:])
		gone()
	}()
	return 0, nil
}

func (p *readerPoller) remove(net.Conn, uint64) {}

// run returns once stopped and every reader ended (their connections are closed by then).
func (p *readerPoller) run() {
	<-p.done
	p.readers.Wait()
}

func (p *readerPoller) stop() { p.once.Do(func() { close(p.done) }) }
