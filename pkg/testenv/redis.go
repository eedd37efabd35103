package testenv

import (
	"context"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerBinary is the redis-server a test starts for itself (StartRedis).
const RedisServerBinary = "/usr/bin/redis-server"

// RedisServer is a redis-server of one test's own, on an ephemeral loopback port and without
// persistence, so the test may flush it, kill it and restart it: the shared Redis every other test
// uses is never touched.
type RedisServer struct {
	t    testing.TB
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a redis-server that keeps nothing on disk (--save "" --appendonly no) and waits
// until it answers PING. It is stopped at cleanup.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, Addr: FreeAddr(t)}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr }

// Client returns a client of the server, closed at cleanup.
func (s *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// FlushAll makes the server lose every key, as a Redis that lost its data would.
func (s *RedisServer) FlushAll() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushAll(ctx).Err(); err != nil {
		s.t.Fatalf("testenv: FLUSHALL on %s: %v", s.Addr, err)
	}
}

// Restart kills the server (SIGKILL: nothing is saved) and starts it again on the same address,
// empty and with an empty script cache.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

func (s *RedisServer) start() {
	s.t.Helper()
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd = exec.Command(RedisServerBinary, "--port", port, "--bind", "127.0.0.1", //nolint:gosec // a fixed binary with test-chosen arguments
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start %s: %v", RedisServerBinary, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	WaitFor(s.t, 10*time.Second, "redis-server on "+s.Addr+" to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
}

func (s *RedisServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
