//go:build linux

package park

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// epollPoller watches every taken-over connection of a lot with one goroutine blocked in
// epoll_wait, instead of a goroutine per connection blocked in a read. Each registration carries a
// token of its own in the event's data (never the fd, whose number the kernel reuses once a
// connection is closed), and is removed before its connection is closed. Events are one-shot:
// anything readable or a hang-up ends the stream, so one event per registration is all it needs.
type epollPoller struct {
	epfd, evfd int

	mu   sync.Mutex
	next uint64
	regs map[uint64]func()
	// stopped is set by stop under mu, and run takes mu when the stop token arrives: the eventfd
	// wakes the wait, but a write to it orders nothing for the memory model, so without the lock
	// run's shutdown (which waits for the fallback readers) is not ordered after the registrations
	// made before stop.
	stopped bool
	// readers are the fallback reader goroutines of connections that expose no file descriptor.
	readers *readerPoller
}

// stopToken is the event data of the poller's own eventfd, which stop writes to.
const stopToken = 0

func newPoller() (poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setToken(&ev, stopToken)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(evfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return &epollPoller{epfd: epfd, evfd: evfd, next: stopToken + 1, regs: map[uint64]func(){}, readers: newReaderPoller()}, nil
}

// The event's 64-bit data is the Fd and Pad fields of unix.EpollEvent.
func setToken(ev *unix.EpollEvent, tok uint64) {
	ev.Fd, ev.Pad = int32(uint32(tok)), int32(uint32(tok>>32))
}

func token(ev *unix.EpollEvent) uint64 { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

func (p *epollPoller) add(nc net.Conn, gone func()) (uint64, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return p.readers.add(nc, gone)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return p.readers.add(nc, gone)
	}
	p.mu.Lock()
	tok := p.next
	p.next++
	p.regs[tok] = gone
	p.mu.Unlock()
	var ctlErr error
	// Control holds the fd open while the function runs, so the registration is of this
	// connection's socket.
	err = rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
		setToken(&ev, tok)
		ctlErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err = errors.Join(err, ctlErr); err != nil {
		p.mu.Lock()
		delete(p.regs, tok)
		p.mu.Unlock()
		return 0, fmt.Errorf("epoll_ctl add: %w", err)
	}
	return tok, nil
}

func (p *epollPoller) remove(nc net.Conn, tok uint64) {
	p.mu.Lock()
	delete(p.regs, tok)
	p.mu.Unlock()
	if tok == stopToken {
		return // a reader goroutine's connection
	}
	// Also after the one-shot event fired: the registration stays in the set, disarmed, until
	// deleted or the socket closed.
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
			})
		}
	}
}

// registered counts the live registrations (tests).
func (p *epollPoller) registered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.regs)
}

// run waits for events until stop, then closes the poller's descriptors once the fallback readers
// have ended.
func (p *epollPoller) run() {
	defer func() {
		_ = unix.Close(p.epfd)
		_ = unix.Close(p.evfd)
		p.readers.stop()
		p.readers.run()
	}()
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for i := range events[:n] {
			tok := token(&events[i])
			if tok == stopToken {
				p.mu.Lock()
				stopped := p.stopped
				p.mu.Unlock()
				if stopped {
					return
				}
				continue
			}
			p.mu.Lock()
			gone := p.regs[tok]
			delete(p.regs, tok)
			p.mu.Unlock()
			if gone != nil {
				gone()
			}
		}
	}
}

func (p *epollPoller) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	var one [8]byte
	one[0] = 1 // eventfd counts in host byte order; any non-zero value wakes the wait
	_, _ = unix.Write(p.evfd, one[:])
}
