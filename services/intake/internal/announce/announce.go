package announce

import (
	"context"
	"log/slog"
	"time"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Timeout bounds one call of Ended.
const Timeout = 2 * time.Second

// Ended publishes the terminal event of each turn of ended, which a statement ended with status,
// naming each turn as its client knows it in region code (empty in single-region mode).
// pub may be nil (no Redis): nothing is published.
func Ended(ctx context.Context, pub *streams.Publisher, log *slog.Logger, code string, status wire.Status, ended []turnstore.Ended) {
	if pub == nil || len(ended) == 0 {
		return
	}
	t := wire.EventFailed
	switch status {
	case wire.StatusCancelled:
		t = wire.EventCancelled
	case wire.StatusExpired:
		t = wire.EventExpired
	}
	ms := make([]streams.Message, len(ended))
	for i := range ended {
		e := &ended[i]
		shown := e.ShownTurnID(code)
		ms[i] = streams.Message{
			Session: e.Session, TurnID: shown, TurnRow: e.TurnID, Token: e.Token,
			Event: wire.NewEvent(t, wire.ErrorData{EventBase: wire.EventBase{TurnID: shown, Attempt: e.Attempt}, Error: e.Error}),
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	for i, r := range pub.PublishMany(ctx, ms) {
		if r.Err != nil {
			log.WarnContext(ctx, "terminal event of a turn ended in intake not published; a worker reading its record will",
				"turn_id", ms[i].TurnID, "session_id", ms[i].Session.SessionID(), "status", status, "err", r.Err)
		}
	}
}
