package lifecycle

import (
	"context"
	"time"
)

// Every calls fn once per interval, after each tick of a ticker, until ctx ends, and never once ctx
// has ended; a call that overruns the interval delays the next rather than piling calls up. It is
// the run function of a periodic component (the lease renewer, the offset committer, the vacuumer,
// the backlog monitor, the hub's resync): the component's Loop owns the goroutine, Every the ticker.
func Every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return // both were ready and select took the tick
			}
			fn(ctx)
		}
	}
}
