package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/registry/client"
)

// TestKeeper runs the replica's client against the registry: it registers, renews several times
// per lease, registers again after a 412, and stops for good when a replacement holds its ID.
func TestKeeper(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Lease: 600 * time.Millisecond})
	registered := make(chan registry.Lease, 8)
	renewed := make(chan registry.Lease, 64)
	stale := make(chan int64, 8)
	k, err := client.New(client.Config{
		URL: b.srv.URL, Agent: "echo", Log: b.env.Log,
		Registration: registry.Registration{InstanceID: "echo-0", Endpoint: "http://10.0.0.1:9000/", Zone: "a"},
		Hooks: client.Hooks{
			Registered: func(l registry.Lease) { registered <- l },
			Renewed: func(l registry.Lease) {
				select {
				case renewed <- l:
				default:
				}
			},
			Stale: func(e int64) { stale <- e },
		},
	})
	require.NoError(t, err)
	require.NoError(t, k.Start(t.Context()))
	defer func() { require.NoError(t, k.Stop(t.Context())) }()

	first := recv(t, registered)
	require.InDelta(t, 0.2, first.HeartbeatSeconds, 0.001, "a third of the lease")
	for range 3 {
		require.Equal(t, first.Epoch, recv(t, renewed).Epoch)
	}

	// The registration is removed behind the keeper's back: its next renewal is stale, and it
	// registers again under its ID with a new epoch.
	_, err = b.env.Pool.Exec(t.Context(), `UPDATE agent_instances SET state = 'deleted' WHERE instance_id = 'echo-0'`)
	require.NoError(t, err)
	require.Equal(t, first.Epoch, recv(t, stale))
	second := recv(t, registered)
	require.Greater(t, second.Epoch, first.Epoch)
	require.Equal(t, "echo-0", second.InstanceID)

	// A replacement takes the ID over (at another endpoint): the keeper's renewal is stale, its
	// registration again conflicts, and it stops.
	b.expire(t, "echo-0")
	repl := b.register(t, "echo-0", "http://10.0.0.2:9000/", "a")
	select {
	case <-k.Superseded():
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced keeper did not stop")
	}
	_, held := k.Lease()
	require.False(t, held)
	list, err := b.h.Store().List(t.Context(), "echo")
	require.NoError(t, err)
	require.Len(t, list.Instances, 1)
	require.Equal(t, "http://10.0.0.2:9000/", list.Instances[0].Endpoint)
	require.Equal(t, repl.Epoch, list.Instances[0].Epoch)
	st := k.Stats()
	require.EqualValues(t, 2, st.Registrations)
	require.GreaterOrEqual(t, st.Stale, int64(2))
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}
