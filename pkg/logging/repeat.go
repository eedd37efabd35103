package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Repeated logs a condition that can recur on every pass of a loop (a fetch error, a failed
// commit) without flooding the log: the first occurrence of a key is logged at once, and later ones
// at most once per interval, each line saying how many occurrences it stands for ("repeats") and
// over how long ("over"). A key is what makes two occurrences the same condition, such as a topic
// and an error's text. Safe for concurrent use.
type Repeated struct {
	log   *slog.Logger
	level slog.Level
	msg   string
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*repeat
}

type repeat struct {
	logged     time.Time // when the last line for the key was written
	suppressed int       // occurrences since then that wrote no line
}

// repeatedKeysMax bounds the keys a Repeated remembers: past it, keys with no line for an
// interval are forgotten (their next occurrence is logged at once, as a first one).
const repeatedKeysMax = 64

// NewRepeated returns a Repeated that logs msg at level on log, a key's lines at most once per
// every.
func NewRepeated(log *slog.Logger, level slog.Level, msg string, every time.Duration) *Repeated {
	return &Repeated{log: log, level: level, msg: msg, every: every, now: time.Now, keys: map[string]*repeat{}}
}

// Log records an occurrence of key and logs it with attrs unless a line for key was logged less
// than the interval ago. It reports whether it wrote a line.
func (r *Repeated) Log(ctx context.Context, key string, attrs ...slog.Attr) bool {
	now := r.now()
	r.mu.Lock()
	k := r.keys[key]
	if k != nil && now.Sub(k.logged) < r.every {
		k.suppressed++
		r.mu.Unlock()
		return false
	}
	var repeats int
	var over time.Duration
	if k == nil {
		r.forgetLocked(now)
		k = &repeat{}
		r.keys[key] = k
	} else {
		repeats, over = k.suppressed, now.Sub(k.logged)
	}
	k.logged, k.suppressed = now, 0
	r.mu.Unlock()
	if repeats > 0 {
		attrs = append(attrs, slog.Int("repeats", repeats), slog.Duration("over", over.Round(time.Millisecond)))
	}
	r.log.LogAttrs(ctx, r.level, r.msg, attrs...)
	return true
}

// forgetLocked drops the keys that logged nothing for an interval once there are too many.
func (r *Repeated) forgetLocked(now time.Time) {
	if len(r.keys) < repeatedKeysMax {
		return
	}
	for key, k := range r.keys {
		if now.Sub(k.logged) >= r.every {
			delete(r.keys, key)
		}
	}
}
