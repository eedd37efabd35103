package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofServer serves net/http/pprof on a listener of its own (config.Config.PprofAddr), so the
// API's address never exposes it: profiles show what a process holds and where its CPU goes, which
// is for operators, not clients.
type pprofServer struct {
	server *http.Server
	addr   string
	done   chan error
}

// startPprof listens on addr and serves the profiles until stop.
func startPprof(addr string) (*pprofServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on TURNSTILE_PPROF_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace answers after the seconds it was asked to record.
	p := &pprofServer{server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() {
		err := p.server.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		p.done <- err
	}()
	return p, nil
}

// stop closes the listener and every profile being recorded, and waits for the server to end.
func (p *pprofServer) stop() error {
	err := p.server.Close()
	return errors.Join(err, <-p.done)
}
