package consume

import (
	"context"
	"errors"

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
)

// ErrDraining is the cause with which the turn context ends when the drain grace period is over.
var ErrDraining = errors.New("worker draining")
