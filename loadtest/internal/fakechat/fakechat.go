package fakechat

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Server streams Tokens tokens, one every Interval, to every chat completion request.
// Its zero value is not usable; set both fields.
type Server struct {
	// Interval is the pause before each token.
	Interval time.Duration
	// Tokens is how many tokens one answer has.
	Tokens int

	requests atomic.Int64
	open     atomic.Int64
}

// Requests counts the chat completion requests received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Open counts the answers being streamed now.
func (s *Server) Open() int64 { return s.open.Load() }

const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`

// ServeHTTP answers POST /v1/chat/completions; anything else is 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	s.requests.Add(1)
	s.open.Add(1)
	defer s.open.Add(-1)
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(data string) bool {
		_, err := fmt.Fprintf(w, "data: %s\n\n", data)
		if fl != nil {
			fl.Flush()
		}
		return err == nil
	}
	if !send(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`) {
		return
	}
	t := time.NewTimer(s.Interval)
	defer t.Stop()
	for i := range s.Tokens {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		t.Reset(s.Interval)
		tok := Token(i, time.Now())
		if !send(head + `{"index":0,"delta":{"content":"` + tok + `"},"finish_reason":null}]}`) {
			return
		}
	}
	send(head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	send("[DONE]")
}

// Token is the text of the index-th token written at sent.
func Token(index int, sent time.Time) string {
	return strconv.Itoa(index) + "@" + strconv.FormatInt(sent.UnixNano(), 10) + " "
}

// Parsed is one token read back from a delta's text.
type Parsed struct {
	Index int
	Sent  time.Time
}

// Parse reads the tokens of a text made of Token texts (one delta may carry several, if the
// platform coalesced them). A word that is not a token is an error.
func Parse(text string) ([]Parsed, error) {
	var out []Parsed
	for w := range strings.FieldsSeq(text) {
		i, ns, ok := strings.Cut(w, "@")
		if !ok {
			return out, fmt.Errorf("not a token: %q", w)
		}
		n, err1 := strconv.Atoi(i)
		t, err2 := strconv.ParseInt(ns, 10, 64)
		if err1 != nil || err2 != nil {
			return out, fmt.Errorf("not a token: %q", w)
		}
		out = append(out, Parsed{Index: n, Sent: time.Unix(0, t)})
	}
	return out, nil
}

// Serve serves s on addr until ctx ends, calling ready with the address it listens on. When
// certFile is set it serves HTTPS (HTTP/2 offered, as hosted models do) with a self-signed
// certificate for 127.0.0.1, written to certFile as PEM for clients to trust (SSL_CERT_FILE).
func Serve(ctx context.Context, addr, certFile string, s *Server, ready func(addr string)) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	if certFile != "" {
		cert, err := selfSigned(certFile)
		if err != nil {
			_ = ln.Close()
			return err
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100} // of the order hosted models advertise: streams spread over connections
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	ready(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = srv.Close()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// selfSigned makes a certificate for 127.0.0.1 and writes it to file as PEM.
func selfSigned(file string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fakechat"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(file, pemCert, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
