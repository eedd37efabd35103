package consume

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Handler runs one record to its end and says what becomes of the record. ctx is the consumer's
// turn context: it ends, with ErrDraining as its cause, when Stop's drain grace period is over, and
// a handler that then cannot finish hands its record off. The worker's handler is the executor's
// (package execute).
type Handler func(ctx context.Context, rec *kgo.Record) Result

// Result is what the consumer does with a record once its handler returned.
type Result int

// Results of a Handler.
const (
	// Commit: the record is done with (its turn is terminal, here or elsewhere); its offset may be
	// committed and its session's next record may start.
	Commit Result = iota
	// HandOff: the worker is draining and the record's turn was released for another worker. The
	// record is not committed, and the session's later records are dropped, so that the next owner
	// of the partition runs them all in order.
	HandOff
	// Defer: the record's turn may not start yet (an earlier accepted turn of its session is not
	// terminal: the claim said so). The record is held, uncommitted, and the session's later
	// records may start meanwhile (the earlier turn may be among them: a re-driven record lands
	// behind the records accepted after it); it is handed to the handler again when a record of
	// its session ends, or after a pause that grows from DeferPauseFirst to DeferPauseLongest while
	// nothing of the session runs here (its earlier turn runs elsewhere, or is yet to be
	// re-driven).
	Defer
)

// The pauses of a deferred record whose session has nothing else to run here.
const (
	DeferPauseFirst   = 250 * time.Millisecond
	DeferPauseLongest = 5 * time.Second
)

// ErrDraining is the cause with which the turn context ends when the drain grace period is over.
var ErrDraining = errors.New("worker draining")
