package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds the all-in-one turnstile binary once per test process and returns its path, or
// returns TURNSTILE_TEST_BINARY when set (a binary of another commit, for before/after runs).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if bin := os.Getenv("TURNSTILE_TEST_BINARY"); bin != "" {
			// A binary built elsewhere, such as an earlier commit's, to compare against.
			buildPath = bin
			return
		}
		dir, err := os.MkdirTemp("", "turnstile-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "turnstile")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/turnstile-run/turnstile/cmd/turnstile") //nolint:gosec // builds this repository's own binary into a temporary directory
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build turnstile: %w\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Process is a turnstile binary running as a child process.
type Process struct {
	Name string
	Addr string
	cmd  *exec.Cmd
	logs *SyncBuffer
	done chan error
}

// StartProcess runs the binary with env and waits until its /healthz answers. It is killed at
// cleanup if still running.
func StartProcess(t testing.TB, name string, env []string, httpAddr string) *Process {
	t.Helper()
	cmd := exec.Command(Binary(t)) //nolint:gosec // runs the binary Binary just built
	cmd.Env = env
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, Addr: httpAddr, cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.doneOnce() //nolint:errcheck // killed on purpose: its exit error says nothing
		if t.Failed() {
			t.Logf("logs of %s:\n%s", name, logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited at start: %v\n%s", name, err, logs.String())
		default:
		}
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become healthy:\n%s", name, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Process) doneOnce() <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := <-p.done
		p.done <- err
		ch <- err
	}()
	return ch
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Wait waits for the process to exit and returns its error (nil for exit status 0).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case err := <-p.doneOnce():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Logs returns everything the process wrote.
func (p *Process) Logs() string { return p.logs.String() }

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a child process's output, a logger).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
