package consume

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoAssignment is what Waiting wraps until the group has given this member its first
// assignment.
var ErrNoAssignment = errors.New("waiting for a group assignment")

// clientSessionTimeout is the Kafka client's group session timeout, used when Config leaves it
// zero.
const clientSessionTimeout = 45 * time.Second

// Waiting says what the consumer waits for before it can run turns: an error wrapping
// ErrNoAssignment from Start until the group has completed the member's first assignment (of no
// partitions, if the group has more members than partitions), nil after. A replacement for a worker that died
// waits here for up to the session timeout, since the group assigns the dead member's partitions
// only once its session has timed out.
func (c *Consumer) Waiting() error {
	if c.joined.Load() {
		return nil
	}
	return fmt.Errorf("%w (a dead member's partitions move when its session times out, %v after its last heartbeat)",
		ErrNoAssignment, c.sessionTimeout())
}

func (c *Consumer) sessionTimeout() time.Duration {
	if c.cfg.SessionTimeout > 0 {
		return c.cfg.SessionTimeout
	}
	return clientSessionTimeout
}
