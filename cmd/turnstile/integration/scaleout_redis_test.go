package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// startRedisCluster starts a three-master Redis Cluster on free loopback ports with
// scripts/redis-cluster.sh and stops it at cleanup. It returns the nodes' addresses.
func startRedisCluster(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is required for the Redis Cluster test: %v", err)
	}
	script, err := filepath.Abs("../../../scripts/redis-cluster.sh")
	require.NoError(t, err)
	dir := t.TempDir()
	ports := clusterPorts(t, 3)
	args := []string{script, "start", dir}
	for _, p := range ports {
		args = append(args, strconv.Itoa(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = exec.Command("bash", script, "stop", dir).Run() })
	out, err := exec.CommandContext(ctx, "bash", args...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("start redis cluster: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(out)), ",")
}

// clusterPorts finds n free loopback ports whose cluster-bus ports (+10000) are free too.
func clusterPorts(t *testing.T, n int) []int {
	t.Helper()
	free := func(p int) bool {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		_ = ln.Close()
		return true
	}
	var out []int
	for p := 20000 + int(time.Now().UnixNano()%20000); len(out) < n && p < 45000; p += 7 {
		if free(p) && free(p+10000) {
			out = append(out, p)
		}
	}
	require.Len(t, out, n, "no free ports for a Redis Cluster")
	return out
}

// TestScaleOutRedisCluster runs the end-to-end flow with every Redis access going through a
// three-master Redis Cluster: the per-session keys are hash-tagged, so each session's stream,
// metadata and notifications live on one node while sessions spread across the nodes.
func TestScaleOutRedisCluster(t *testing.T) {
	addrs := startRedisCluster(t)
	env := testenv.New(t, testenv.Options{Partitions: 4})
	env.Config.RedisClusterAddrs = strings.Join(addrs, ",")
	stack := startStack(t, env, "intake,worker,gateway")
	checkSessions(t, "http://"+stack.Addr(), 8, 3)

	// The sessions' streams really are spread over the masters.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var holders atomic.Int32 // ForEachMaster runs its function on the masters concurrently
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, env.Config.KeyPrefix+":*").Result()
		if len(keys) > 0 {
			holders.Add(1)
		}
		return err
	}))
	require.GreaterOrEqual(t, holders.Load(), int32(2), "8 sessions' keys should spread over at least 2 of 3 masters")
}

// TestPublishManyOnRedisCluster publishes batches that mix many sessions through a cluster client:
// a script call may only touch one slot, so the publisher sends each session's events in calls of
// their own. Every event must land, in order, each naming its predecessor.
func TestPublishManyOnRedisCluster(t *testing.T) {
	addrs := startRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := "ts-" + testenv.RandomHex(4)
	pub := streams.NewPublisher(rdb, prefix, 10000, time.Hour)
	const sessions, rounds = 60, 3
	for r := range rounds {
		var ms []streams.Message
		for i := range 2 * sessions { // two events per session per batch, sessions interleaved
			s := "s" + strconv.Itoa(i%sessions)
			data, _ := json.Marshal(map[string]int{"n": r*2 + i/sessions})
			ms = append(ms, streams.Message{Session: storeKey(s), TurnID: "t", Token: 1, Event: wire.Event{Type: wire.EventDelta, Data: data}})
		}
		for i, res := range pub.PublishMany(ctx, ms) {
			require.NoError(t, res.Err, "round %d message %d", r, i)
			require.True(t, res.Published.Appended)
		}
	}
	for i := range sessions {
		entries, err := rdb.XRange(ctx, streams.KeysFor(prefix, storeKey("s"+strconv.Itoa(i))).Events, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, entries, 2*rounds)
		for n, e := range entries {
			require.JSONEq(t, `{"n":`+strconv.Itoa(n)+`}`, e.Values["data"].(string))
			if n > 0 {
				require.Equal(t, entries[n-1].ID, e.Values["prev"])
			}
		}
	}
}
