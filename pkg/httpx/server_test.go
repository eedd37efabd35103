package httpx

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamingServer serves NewServer on a loopback port: each request gets "first\n" at once and,
// with ?second=1, "second\n" after the server's ReadTimeout has passed three times over; then it is
// held open until release is closed. conns counts the connections accepted.
func streamingServer(t *testing.T, readTimeout time.Duration) (url string, conns *atomic.Int32, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	conns = new(atomic.Int32)
	srv := NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("first\n"))
		_ = http.NewResponseController(w).Flush()
		if r.URL.Query().Get("second") == "1" {
			// The property under test is a deadline, so the handler waits out time itself.
			select {
			case <-time.After(3 * readTimeout):
			case <-r.Context().Done():
				return
			}
			_, _ = w.Write([]byte("second\n"))
			_ = http.NewResponseController(w).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	if readTimeout > 0 {
		srv.ReadTimeout = readTimeout
	}
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	return "http://" + ln.Addr().String() + "/", conns, release
}

// open starts a request and reads its first line.
func open(ctx context.Context, t *testing.T, hc *http.Client, url string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first\n", line)
	return resp, br
}

func TestServerSpeaksHTTP1AndH2C(t *testing.T) {
	url, _, _ := streamingServer(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		tr   interface {
			http.RoundTripper
			CloseIdleConnections()
		}
		major int
	}{
		{"HTTP1", http.DefaultTransport.(*http.Transport).Clone(), 1},
		{"H2C", H2CTransport(), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.tr.CloseIdleConnections()
			resp, _ := open(ctx, t, &http.Client{Transport: c.tr}, url)
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, c.major, resp.ProtoMajor)
		})
	}
}

// TestH2CStreamsShareConnections holds more streams open at once than one connection may carry:
// they take two or three connections, where HTTP/1.1 would take one each.
func TestH2CStreamsShareConnections(t *testing.T) {
	url, conns, release := streamingServer(t, 0)
	tr := H2CTransport()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = MaxStreamsPerConn + MaxStreamsPerConn/5
	var wg sync.WaitGroup
	bodies := make(chan *http.Response, streams)
	errs := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			bodies <- resp
			if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first\n" {
				errs <- errors.Join(errors.New("no first line: "+line), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Every stream has had its first line and is still open: two connections' worth, and perhaps a
	// third dialled while the first had only the client's initial allowance (100 streams) before the
	// server's settings raised it.
	n := conns.Load()
	require.True(t, n >= 2 && n <= 3, "%d connections for %d streams", n, streams)
	close(release)
	close(bodies)
	for resp := range bodies {
		require.Equal(t, 2, resp.ProtoMajor)
		_ = resp.Body.Close()
	}
}

// TestH2CStreamOutlivesReadTimeout checks that ReadTimeout, which bounds a request's body, does not
// end an HTTP/2 stream that lasts longer.
func TestH2CStreamOutlivesReadTimeout(t *testing.T) {
	const readTimeout = 50 * time.Millisecond
	url, _, _ := streamingServer(t, readTimeout)
	tr := H2CTransport()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, br := open(ctx, t, &http.Client{Transport: tr}, url+"?second=1")
	defer func() { _ = resp.Body.Close() }()
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "second\n", line)
}
