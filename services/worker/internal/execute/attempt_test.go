package execute

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// The worker's batchers and the unbatched batch functions are both what the executor takes.
var (
	_ Claimer   = (*batch.Batcher[lease.ClaimRequest, lease.Claim])(nil)
	_ Claimer   = batch.Func[lease.ClaimRequest, lease.Claim](nil)
	_ Completer = (*batch.Batcher[lease.Completion, int64])(nil)
	_ Completer = batch.Func[lease.Completion, int64](nil)
	_ Publisher = (*batch.Batcher[[]streams.Message, []streams.PublishResult])(nil)
)

// TestVerdict holds the decision of an attempt's outcome to the rules it follows: where the work
// stopped and why, the causes of the attempt's and the turn's contexts, a refused turn.started,
// the attempt number and the deadline.
func TestVerdict(t *testing.T) {
	t.Parallel()
	x := &Executor{cfg: Config{MaxAttempts: 3}}
	x.maxAttempts.Store(3)
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for _, tc := range []struct {
		name string
		step step
		err  error
		// number is the attempt's (1 when zero); past puts the deadline behind it.
		number int
		past   bool
		// attemptCause and turnCause, when set, end the attempt's or the turn's context with them.
		attemptCause, turnCause error
		// heldFailed is the failure of the publish of the held turn.started.
		heldFailed error
		want       verdict
	}{
		{name: "CompletionCommitted", step: stepDone, want: verdictSucceeded},
		{name: "CompletionFenced", step: stepComplete, err: fmt.Errorf("complete: %w", turnstore.ErrFenced), want: verdictFenced},
		{name: "CompletionFailedIsRetried", step: stepComplete, err: errors.New("conn reset"), want: verdictRetry},
		{name: "LastAttemptFails", step: stepComplete, err: errors.New("conn reset"), number: 3, want: verdictFailed},
		{name: "PermanentFails", step: stepAgent, err: fmt.Errorf("agent: %w", agent.ErrPermanent), want: verdictFailed},
		{name: "ReadFailedIsRetried", step: stepRead, err: errors.New("history"), want: verdictRetry},
		{name: "ReadFailureIgnoresARefusedStart", step: stepRead, err: errors.New("history"), heldFailed: refused, want: verdictRetry},
		{name: "StaleTokenLosesTheLease", step: stepAgent, err: streams.ErrStaleToken, want: verdictLeaseLost},
		{name: "RenewerLostTheLease", step: stepAgent, err: context.Canceled, attemptCause: lease.ErrLeaseLost, want: verdictLeaseLost},
		{name: "CancelRequested", step: stepAgent, err: context.Canceled, attemptCause: lease.ErrCancelRequested, want: verdictCancelled},
		{name: "Drained", step: stepAgent, err: context.Canceled, turnCause: consume.ErrDraining, want: verdictDrained},
		{name: "RefusedStartStalls", step: stepAgent, err: refused, heldFailed: refused, want: verdictStalled},
		{name: "RefusedStartWhileDrainedHandsOff", step: stepAgent, err: refused, heldFailed: refused, turnCause: consume.ErrDraining, want: verdictDrained},
		{name: "StaleStartLosesTheLease", step: stepAgent, err: streams.ErrStaleToken, heldFailed: streams.ErrStaleToken, want: verdictLeaseLost},
		{name: "OverranTheDeadline", step: stepAgent, err: context.DeadlineExceeded, past: true, want: verdictOverran},
		{name: "TimeoutBeforeTheDeadlineIsRetried", step: stepAgent, err: context.DeadlineExceeded, want: verdictRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turnCtx, cancelTurn := context.WithCancelCause(context.Background())
			defer cancelTurn(nil)
			attemptCtx, cancelAttempt := context.WithCancelCause(turnCtx)
			defer cancelAttempt(nil)
			if tc.turnCause != nil {
				cancelTurn(tc.turnCause)
			}
			if tc.attemptCause != nil {
				cancelAttempt(tc.attemptCause)
			}
			deadline := time.Now().Add(time.Hour)
			if tc.past {
				deadline = time.Now().Add(-time.Second)
			}
			a := &attempt{
				turn:   &turn{x: x, ctx: turnCtx, env: wire.Envelope{Deadline: deadline}},
				number: max(tc.number, 1), attemptCtx: attemptCtx,
			}
			a.sink.heldFailed = tc.heldFailed
			require.Equal(t, tc.want, a.verdict(tc.step, tc.err))
		})
	}
}
