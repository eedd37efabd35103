package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/notifier/internal/outbox"
	"github.com/turnstile-run/turnstile/services/notifier/internal/safehttp"
)

// TokenHeader carries the token the client registered with its webhook (A2A's header name, used
// for the native API too).
const TokenHeader = "X-A2A-Notification-Token" //nolint:gosec // a header name, not a credential

// Outcome is what became of one notification.
type Outcome string

// The outcomes.
const (
	Delivered Outcome = "delivered"
	Retried   Outcome = "retried"
	Deferred  Outcome = "deferred"
	Dead      Outcome = "dead"
)

// Result is one delivery's outcome; Wait is when to try again (Retried, Deferred), Err the error
// recorded (Retried, Dead).
type Result struct {
	Outcome Outcome
	Wait    time.Duration
	Err     string
	// Attempted says a POST was sent (its latency is worth measuring).
	Attempted bool
}

// Options tune a Sender.
type Options struct {
	Client         *safehttp.Client
	Secret         string
	PerDestination int
	MaxAttempts    int
	MaxAge         time.Duration
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	// SlotWait is how long a notification whose destination has no free slot waits before it is
	// claimed again: uniform in [SlotWait/2, SlotWait]. A slot frees within the POST timeout, so
	// about half of it; much shorter would have a hanging destination's rows re-claimed over and
	// over, taking claim capacity from everyone else.
	SlotWait time.Duration
	// BreakerFailures consecutive failures open a destination's circuit for BreakerOpen.
	BreakerFailures int
	BreakerOpen     time.Duration
	// OnBreaker is told every change of a destination's circuit.
	OnBreaker func(destination string, state gobreaker.State)
	// Region is this region's code (TURNSTILE_REGION), which the IDs of every body carry.
	Region string
	Now    func() time.Time
}

// Sender delivers notifications.
type Sender struct {
	opt    Options
	signer *standardwebhooks.Webhook

	mu    sync.Mutex
	dests map[string]*destination
}

// destination is one receiver's share: its slots and its circuit.
type destination struct {
	slots   chan struct{}
	breaker *gobreaker.CircuitBreaker[safehttp.Answer]
}

// New builds a sender.
func New(opt Options) (*Sender, error) {
	signer, err := standardwebhooks.NewWebhook(opt.Secret)
	if err != nil {
		return nil, fmt.Errorf("signing secret: %w", err)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.SlotWait == 0 {
		opt.SlotWait = time.Second
	}
	if opt.BreakerFailures == 0 {
		opt.BreakerFailures = 5
	}
	if opt.BreakerOpen == 0 {
		opt.BreakerOpen = 10 * time.Second
	}
	return &Sender{opt: opt, signer: signer, dests: map[string]*destination{}}, nil
}

// Destination names the receiver a URL belongs to: its scheme, host and port.
func Destination(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}

func (s *Sender) destination(name string) *destination {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dests[name]
	if !ok {
		d = &destination{slots: make(chan struct{}, s.opt.PerDestination)}
		d.breaker = gobreaker.NewCircuitBreaker[safehttp.Answer](gobreaker.Settings{
			Name:        name,
			MaxRequests: 1,
			Timeout:     s.opt.BreakerOpen,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(s.opt.BreakerFailures) },
			OnStateChange: func(name string, _, to gobreaker.State) {
				if s.opt.OnBreaker != nil {
					s.opt.OnBreaker(name, to)
				}
			},
		})
		s.dests[name] = d
	}
	return d
}

// slotGrace is how long a delivery waits for a slot of its destination before it is deferred.
const slotGrace = 50 * time.Millisecond

// errReceiver marks an answer the circuit counts as the receiver's failure (5xx, 408, 429).
var errReceiver = errors.New("receiver failed")

// Deliver sends n once and says what becomes of it. It never blocks on another destination.
func (s *Sender) Deliver(ctx context.Context, n outbox.Notification) Result {
	u, err := s.opt.Client.CheckURL(n.URL)
	if err != nil {
		return Result{Outcome: Dead, Err: err.Error()}
	}
	d := s.destination(Destination(u))
	// A healthy destination frees a slot within milliseconds: wait that long, no longer.
	grace := time.NewTimer(slotGrace)
	defer grace.Stop()
	select {
	case d.slots <- struct{}{}:
		defer func() { <-d.slots }()
	case <-ctx.Done():
		return Result{Outcome: Deferred, Err: "notifier stopping"}
	case <-grace.C:
		return Result{Outcome: Deferred, Wait: s.opt.SlotWait/2 + time.Duration(rand.Int64N(int64(s.opt.SlotWait/2)+1))} //nolint:gosec // jitter needs no cryptographic randomness
	}
	req, err := s.request(ctx, n)
	if err != nil {
		return Result{Outcome: Dead, Err: err.Error()}
	}
	ans, err := d.breaker.Execute(func() (safehttp.Answer, error) {
		a, err := s.opt.Client.Do(ctx, req)
		if err == nil && (a.Status >= 500 || a.Status == http.StatusRequestTimeout || a.Status == http.StatusTooManyRequests) {
			return a, errReceiver
		}
		return a, err
	})
	switch {
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return Result{Outcome: Deferred, Wait: s.jitter(0) + s.opt.BreakerOpen/2}
	case ctx.Err() != nil:
		return Result{Outcome: Deferred, Wait: 0, Err: "notifier stopping"}
	case errors.Is(err, safehttp.ErrRefused):
		return Result{Outcome: Dead, Err: err.Error(), Attempted: true}
	case err == nil && ans.Status >= 200 && ans.Status < 300:
		return Result{Outcome: Delivered, Attempted: true}
	}
	msg := ""
	if err != nil && !errors.Is(err, errReceiver) {
		msg = err.Error()
	} else {
		msg = fmt.Sprintf("answered %d: %.200s", ans.Status, ans.Body)
	}
	return s.failed(n, msg, ans.RetryAfter)
}

// failed decides between a retry and the dead letter after a failed attempt.
func (s *Sender) failed(n outbox.Notification, msg string, retryAfter time.Duration) Result {
	attempts := n.Attempts + 1
	wait := max(s.jitter(attempts), retryAfter)
	if attempts >= s.opt.MaxAttempts || s.opt.Now().Add(wait).Sub(n.Created) > s.opt.MaxAge {
		return Result{Outcome: Dead, Err: msg, Attempted: true}
	}
	return Result{Outcome: Retried, Wait: wait, Err: msg, Attempted: true}
}

// jitter is the full-jitter backoff after attempts failed attempts: uniform in [0, base·2^(attempts-1)],
// capped at BackoffMax; with attempts 0, a short pause of up to a tenth of the base.
func (s *Sender) jitter(attempts int) time.Duration {
	if attempts == 0 {
		return time.Duration(rand.Int64N(int64(s.opt.BackoffBase/10) + 1)) //nolint:gosec // jitter needs no cryptographic randomness
	}
	ceiling := s.opt.BackoffMax
	if attempts-1 < 40 {
		ceiling = min(ceiling, s.opt.BackoffBase<<(attempts-1))
	}
	if ceiling <= 0 {
		ceiling = s.opt.BackoffMax
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1)) //nolint:gosec // jitter needs no cryptographic randomness
}

// Body is what n POSTs in region code (pkg/region; empty in single-region mode): the turn's
// status, or for an A2A config's notification the A2A Task its snapshot renders, with the IDs in
// the prefixed form the API shows (the outbox keeps bare UUIDs). The same row gives the same
// bytes on every attempt, so a duplicate carries the body of its first delivery.
func Body(n outbox.Notification, code string) ([]byte, error) {
	switch n.Format {
	case FormatA2A:
		b, err := a2atask.Push(n.Payload, n.Created, code)
		if err != nil {
			return nil, fmt.Errorf("render the A2A task: %w", err)
		}
		return b, nil
	case FormatA2A10:
		b, err := a2atask.PushV1(n.Payload, n.Created, code)
		if err != nil {
			return nil, fmt.Errorf("render the A2A 1.0 task: %w", err)
		}
		return b, nil
	}
	if code == "" {
		return n.Payload, nil
	}
	var status map[string]json.RawMessage
	if err := json.Unmarshal(n.Payload, &status); err != nil {
		return nil, fmt.Errorf("read the turn's status: %w", err)
	}
	var id string
	if err := json.Unmarshal(status["turn_id"], &id); err != nil {
		return nil, fmt.Errorf("read the turn's ID: %w", err)
	}
	shown, err := json.Marshal(region.Prefix(code, id))
	if err != nil {
		return nil, err
	}
	status["turn_id"] = shown
	return json.Marshal(status) // map keys are sorted: the same bytes on every attempt
}

// The formats of an A2A push config's notifications: FormatA2A (migration 00150) for a config
// created through protocol 0.3, its body the Task; FormatA2A10 (migration 00280) for one created
// through 1.0, its body 1.0's StreamResponse carrying the Task.
const (
	FormatA2A   = "a2a"
	FormatA2A10 = "a2a-1.0"
)

// request builds the signed POST of n's body.
func (s *Sender) request(ctx context.Context, n outbox.Notification) (*http.Request, error) {
	body, err := Body(n, s.opt.Region)
	if err != nil {
		return nil, err
	}
	now := s.opt.Now()
	sig, err := s.signer.Sign(n.WebhookID(), now, body)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "turnstile-notifier")
	req.Header.Set(standardwebhooks.HeaderWebhookID, n.WebhookID())
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	if n.Token != "" {
		req.Header.Set(TokenHeader, n.Token)
	}
	if n.AuthHeader != "" {
		req.Header.Set("Authorization", n.AuthHeader)
	}
	return req, nil
}
