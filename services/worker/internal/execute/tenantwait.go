package execute

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// announceTimeout bounds one batch of tenant-limit announcements.
const announceTimeout = 5 * time.Second

// AnnounceTenantLimit publishes turn.waiting with reason tenant_limit for turns the consumer holds
// at their tenant's concurrency quota (consume.Config.Held). The turns have not started: the
// events carry attempt 0 and token 0, which the publisher checks against the turn's row (a turn
// that already had an attempt has a newer token, and its announcement is dropped as stale, as it
// should: its stream already told its story). Best effort: a failed announcement is logged and the
// turn waits all the same.
func (x *Executor) AnnounceTenantLimit(recs []*kgo.Record) {
	if x.cfg.Streams == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
	defer cancel()
	ms := make([]streams.Message, 0, len(recs))
	for _, rec := range recs {
		env, err := wire.DecodeEnvelope(rec.Value)
		if err != nil {
			continue // the executor dead-letters it when it runs
		}
		id := env.ShownTurnID()
		ms = append(ms, streams.Message{
			Session: env.SessionKey(), TurnID: id, TurnRow: env.TurnID,
			Event: wire.NewEvent(wire.EventWaiting, wire.WaitingData{
				EventBase: wire.EventBase{TurnID: id}, Reason: wire.WaitTenantLimit,
			}),
		})
	}
	for i, r := range x.cfg.Streams.PublishMany(ctx, ms) {
		if r.Err != nil && !errors.Is(r.Err, streams.ErrStaleToken) {
			x.log.WarnContext(ctx, "announcing a turn held at its tenant's limit failed", "turn_id", ms[i].TurnID, "err", r.Err)
		}
	}
	x.log.InfoContext(ctx, "turns wait for their tenant's concurrency quota", "turns", len(ms))
}
