//go:build linux

package park

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server, err = ln.Accept()
	require.NoError(t, err)
	return server, client
}

func TestEpollPoller(t *testing.T) {
	p, err := newPoller()
	require.NoError(t, err)
	ep, ok := p.(*epollPoller)
	if !ok {
		t.Skip("no epoll on this platform")
	}
	ran := make(chan struct{})
	go func() { defer close(ran); p.run() }()
	defer func() { p.stop(); <-ran }()

	type reg struct {
		srv, cli net.Conn
		tok      uint64
		gone     chan struct{}
	}
	add := func() *reg {
		r := &reg{gone: make(chan struct{})}
		r.srv, r.cli = tcpPair(t)
		var once sync.Once
		r.tok, err = p.add(r.srv, func() { once.Do(func() { close(r.gone) }) })
		require.NoError(t, err)
		return r
	}

	// A client that hangs up is noticed.
	a := add()
	require.Equal(t, 1, ep.registered())
	require.NoError(t, a.cli.Close())
	select {
	case <-a.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("hang-up not noticed")
	}
	require.Equal(t, 0, ep.registered(), "a fired registration is dropped")
	p.remove(a.srv, a.tok)
	require.NoError(t, a.srv.Close())

	// A client that sends anything is noticed too.
	b := add()
	_, err = b.cli.Write([]byte("x"))
	require.NoError(t, err)
	select {
	case <-b.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("readable connection not noticed")
	}
	p.remove(b.srv, b.tok)
	require.NoError(t, b.srv.Close())
	require.NoError(t, b.cli.Close())

	// A registration removed before its connection closes never fires, and the next connection,
	// which may get the same fd number, has a token of its own.
	c := add()
	p.remove(c.srv, c.tok)
	require.Equal(t, 0, ep.registered())
	require.NoError(t, c.srv.Close())
	d := add()
	require.NotEqual(t, c.tok, d.tok)
	require.NoError(t, c.cli.Close())
	require.NoError(t, d.cli.Close())
	select {
	case <-d.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("hang-up not noticed")
	}
	select {
	case <-c.gone:
		t.Fatal("a removed registration fired")
	default:
	}
	p.remove(d.srv, d.tok)
	require.NoError(t, d.srv.Close())
}
