package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreeAddr returns a loopback address whose port is free and stays this test's until it ends,
// for a server the test starts later (often in a child process, which must be told its port).
//
// A port the kernel picked for a listener on :0 and that was closed again is handed out anew to
// the next listener on :0 or outgoing connection, so another test could take it before the
// server binds it: with 120 replicas starting in between, CI saw exactly that. FreeAddr therefore
// picks below the kernel's ephemeral range, which neither gets, and reserves the port with a
// lock file in a directory of the user's under the temporary one, held until the test's cleanup, so the other FreeAddr
// callers (in this process and in the other test binaries running beside it) skip it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo, hi := reservablePorts()
	if lo >= hi {
		return kernelPickedAddr(t)
	}
	dir := filepath.Join(os.TempDir(), "turnstile-test-ports-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("port reservations: %v", err)
	}
	for range 200 {
		port := lo + rand.IntN(hi-lo) //nolint:gosec // a port to try, not a secret

		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // a path FreeAddr made
		if err != nil {
			t.Fatalf("port reservations: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // another test holds it
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			_ = f.Close() // something outside the tests uses it
			continue
		}
		_ = ln.Close()
		t.Cleanup(func() { _ = f.Close() })
		return addr
	}
	t.Fatalf("no free port in %d-%d after 200 tries", lo, hi)
	return ""
}

// reservablePorts is the range FreeAddr picks from: the registered ports from 20000 up to the
// kernel's ephemeral range. Empty (lo >= hi) when that range is unknown or leaves too little room.
func reservablePorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &first, &last); err != nil || first < 21000 {
		return 0, 0
	}
	return 20000, first
}

// kernelPickedAddr is FreeAddr where the ephemeral range is unknown: a port that was free a moment
// ago.
func kernelPickedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
