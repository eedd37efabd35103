package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Causes with which the renewer cancels an attempt's context.
var (
	ErrLeaseLost       = errors.New("lease lost")
	ErrCancelRequested = errors.New("turn cancelled")
)

// Renewer extends the leases of every running attempt of this worker in one statement per heartbeat.
// When a lease is reported lost or cancelled it cancels that attempt's context. When renewals fail
// (Postgres unreachable) attempts keep running until their lease has really expired unrenewed.
type Renewer struct {
	store    *Store
	interval time.Duration
	log      *slog.Logger
	// OnRenew, if set, is called after each renewal round with the number of leases sent (for metrics
	// and tests).
	OnRenew func(n int, err error)

	mu   sync.Mutex
	held map[uuid.UUID]*heldLease

	loop lifecycle.Loop
}

type heldLease struct {
	token   wire.FenceToken
	expires time.Time
	cancel  context.CancelCauseFunc
}

// NewRenewer returns a renewer that renews every interval.
func NewRenewer(store *Store, interval time.Duration, log *slog.Logger) *Renewer {
	return &Renewer{store: store, interval: interval, log: log, held: map[uuid.UUID]*heldLease{}}
}

// Track adds a lease acquired at acquiredAt (taken before the claim was sent, so the local view of
// expiry is never later than the database's).
func (r *Renewer) Track(turnID uuid.UUID, token wire.FenceToken, acquiredAt time.Time, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	r.held[turnID] = &heldLease{token: token, expires: acquiredAt.Add(r.store.TTL()), cancel: cancel}
	r.mu.Unlock()
}

// Untrack stops renewing a lease.
func (r *Renewer) Untrack(turnID uuid.UUID) {
	r.mu.Lock()
	delete(r.held, turnID)
	r.mu.Unlock()
}

// Held counts the leases being renewed.
func (r *Renewer) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// Start begins renewing.
func (r *Renewer) Start(ctx context.Context) error {
	r.loop.Start(ctx, func(ctx context.Context) { lifecycle.Every(ctx, r.interval, r.renewOnce) })
	return nil
}

// Stop ends renewing and waits for the loop. Safe twice or before Start.
func (r *Renewer) Stop(ctx context.Context) error { return r.loop.Stop(ctx, "lease renewer") }

func (r *Renewer) renewOnce(ctx context.Context) {
	r.mu.Lock()
	held := make([]Held, 0, len(r.held))
	for id, h := range r.held {
		held = append(held, Held{TurnID: id, Token: h.token})
	}
	r.mu.Unlock()
	if len(held) == 0 {
		return
	}
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, r.interval)
	renewed, err := r.store.Renew(rctx, held)
	cancel()
	if r.OnRenew != nil {
		r.OnRenew(len(held), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("lease renewal failed; attempts continue until their leases expire", "leases", len(held), "err", err)
		now := time.Now()
		for id, h := range r.held {
			if now.After(h.expires) {
				h.cancel(ErrLeaseLost)
				delete(r.held, id)
			}
		}
		return
	}
	alive := make(map[uuid.UUID]bool, len(renewed))
	for _, rn := range renewed {
		alive[rn.TurnID] = true
		if h, ok := r.held[rn.TurnID]; ok {
			h.expires = sent.Add(r.store.TTL())
			if rn.CancelRequested {
				h.cancel(ErrCancelRequested)
			}
		}
	}
	for _, hl := range held {
		if !alive[hl.TurnID] {
			if h, ok := r.held[hl.TurnID]; ok && h.token == hl.Token {
				h.cancel(ErrLeaseLost)
				delete(r.held, hl.TurnID)
			}
		}
	}
}

// CancelRequested cancels the attempt holding turnID, if this worker holds it, as a renewal that
// reported the turn's cancel flag would. It is how a cancel notification reaches a running turn
// before the next heartbeat.
func (r *Renewer) CancelRequested(turnID uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[turnID]
	if ok {
		h.cancel(ErrCancelRequested)
	}
	return ok
}
