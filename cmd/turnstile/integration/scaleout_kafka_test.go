package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestScaleOutKafkaLeadershipMoves runs the end-to-end flow on a three-broker cluster with two
// workers while the leadership of every turns partition keeps moving between brokers: producers
// and consumers must follow the leaders with no lost and no repeated turn (checkSessions asserts the
// exact events of every turn and that each turn succeeded on its first attempt).
func TestScaleOutKafkaLeadershipMoves(t *testing.T) {
	const brokers, partitions = 3, 6
	env := testenv.New(t, testenv.Options{Partitions: partitions, Brokers: brokers})
	cluster := env.KfakeCluster()
	if cluster == nil {
		t.Skip("leadership moves need the embedded kfake cluster (TURNSTILE_KAFKA_BROKERS names a real one)")
	}
	env.Config.DemoDelay = 5 * time.Millisecond
	front := startStack(t, env, "intake,gateway")
	for i := range 2 {
		w := *env
		w.Config.InstanceID = fmt.Sprintf("%s-worker-%d", env.ID, i)
		startStack(t, &w, "worker")
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	moves := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			p := int32(i % partitions)
			to := (cluster.LeaderFor(env.Config.Topic, p) + 1) % brokers
			if err := cluster.MoveTopicPartition(env.Config.Topic, p, to); err != nil {
				t.Errorf("move partition %d to broker %d: %v", p, to, err)
				return
			}
			moves++
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	checkSessions(t, "http://"+front.Addr(), 8, 3)
	cancel()
	wg.Wait()
	t.Logf("partition leadership moved %d times during the run", moves)
	require.GreaterOrEqual(t, moves, partitions, "leadership must have moved during the run")

	// Every accepted turn ran exactly once: 24 rows, all succeeded on their first attempt.
	var total, firstAttempt int
	qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer qcancel()
	require.NoError(t, env.Pool.QueryRow(qctx, `SELECT count(*), count(*) FILTER (WHERE status = 'succeeded' AND attempt = 1) FROM turns`).Scan(&total, &firstAttempt))
	require.Equal(t, 24, total)
	require.Equal(t, 24, firstAttempt)
}
