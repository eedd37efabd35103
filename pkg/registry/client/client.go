// Package client is the replica's side of the agent registry (docs/REGISTRY.md): a Keeper
// registers one replica of a catalog agent and keeps its registration by renewing it with its
// epoch, on a jittered heartbeat a few times per lease.
//
// Registry errors are routine to it: a failed renewal is tried again on the next tick, and the
// lease (three heartbeats by default) absorbs a short outage. A shed request (503) waits its
// Retry-After. Only a 412 — the registration is gone or holds a newer epoch — makes it register
// again; a 409 to that registration means a replacement holds the instance ID, and the keeper
// stops for good (its endpoint must not come back). A 409 to a first registration is a
// predecessor's lease not yet run out, and is tried again.
//
//	k, err := client.New(client.Config{
//		URL: "http://intake:8080", Agent: "billing",
//		Registration: registry.Registration{InstanceID: "billing-0", Endpoint: "http://10.0.0.7:9000/", Zone: "a"},
//	})
//	_ = k.Start(ctx)
//	defer k.Stop(ctx) // deregisters
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/registry"
)

// Defaults.
const (
	// RequestTimeoutDefault bounds one request to the registry.
	RequestTimeoutDefault = 2 * time.Second
	// BackoffDefault is the first wait after a failed registration; it doubles up to BackoffMax,
	// and each wait is drawn uniformly below it (full jitter).
	BackoffDefault = 200 * time.Millisecond
	// BackoffMax caps the wait between registration attempts.
	BackoffMax = 10 * time.Second
	// Jitter spreads each heartbeat uniformly over ±Jitter of its interval, so a fleet started
	// together does not renew together for ever.
	Jitter = 0.2
)

// Errors a Keeper reports through its hooks.
var (
	// ErrSuperseded is a registration refused because a replacement holds the instance ID after
	// this replica's own registration was fenced off: the keeper stops.
	ErrSuperseded = errors.New("registration superseded by a replacement")
	// ErrStale is a renewal refused with 412.
	ErrStale = errors.New("stale epoch")
	// errTaken is a 409 to a registration.
	errTaken = errors.New("instance id taken")
)

// Hooks learn of a keeper's events; each may be nil, and must be fast and safe for concurrent use.
type Hooks struct {
	Registered func(registry.Lease)
	Renewed    func(registry.Lease)
	// Stale is a 412 to a renewal; the keeper registers again.
	Stale func(epoch int64)
	// Superseded is the end of the keeper: a replacement holds its instance ID.
	Superseded func()
	// Failed is any other failed request (op is register, renew or deregister); status is the
	// HTTP status, 0 when there was none.
	Failed func(op string, status int, err error)
}

// Config tunes a Keeper.
type Config struct {
	// URL is the registry's base URL (an intake's). Required.
	URL string
	// Agent is the catalog agent the replica serves. Required.
	Agent string
	// Registration is what the replica registers; Endpoint is required.
	Registration registry.Registration
	// APIKey is an admin's API key, sent as a bearer token, when the registry checks keys.
	APIKey string
	// Heartbeat is the renewal interval. Defaults to the registry's heartbeat_seconds (a third
	// of the lease).
	Heartbeat time.Duration
	// RequestTimeout defaults to RequestTimeoutDefault.
	RequestTimeout time.Duration
	// HTTP defaults to a client of its own.
	HTTP *http.Client
	// Deregister on Stop (DELETE with the epoch). Defaults to true; NoDeregister keeps the
	// registration to run out.
	NoDeregister bool
	Log          *slog.Logger
	Hooks        Hooks
}

// Stats count a keeper's requests.
type Stats struct {
	Registrations, Renewals, Stale, Shed, Errors int64
}

// Keeper keeps one replica's registration. Start, Stop; safe for concurrent use.
type Keeper struct {
	lifecycle.Runner
	cfg  Config
	base string

	mu    sync.Mutex
	lease registry.Lease
	held  bool

	registrations, renewals, stale, shed, errs atomic.Int64
	superseded                                 chan struct{}
	supersededOnce                             sync.Once
}

// New returns a keeper; it registers when started.
func New(cfg Config) (*Keeper, error) {
	if cfg.URL == "" || cfg.Agent == "" || cfg.Registration.Endpoint == "" {
		return nil, errors.New("registry client: URL, Agent and Registration.Endpoint are required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = RequestTimeoutDefault
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	base := strings.TrimRight(cfg.URL, "/") + "/v1/agents/" + url.PathEscape(cfg.Agent) + "/instances"
	k := &Keeper{cfg: cfg, base: base, superseded: make(chan struct{})}
	k.Runner = lifecycle.Runner{Name: "registry keeper", Run: k.run}
	return k, nil
}

// Lease is the registration held now; ok is false before the first registration, after a 412
// until the next, and once superseded.
func (k *Keeper) Lease() (registry.Lease, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease, k.held
}

// Superseded is closed when a replacement took the instance ID over and the keeper stopped.
func (k *Keeper) Superseded() <-chan struct{} { return k.superseded }

// Stats returns the counts so far.
func (k *Keeper) Stats() Stats {
	return Stats{
		Registrations: k.registrations.Load(), Renewals: k.renewals.Load(), Stale: k.stale.Load(),
		Shed: k.shed.Load(), Errors: k.errs.Load(),
	}
}

// Stop ends the heartbeats and, unless NoDeregister, removes the registration (within
// RequestTimeout; a registry that does not answer lets the lease run out).
func (k *Keeper) Stop(ctx context.Context) error {
	err := k.Runner.Stop(ctx)
	if l, ok := k.Lease(); ok && !k.cfg.NoDeregister {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.cfg.RequestTimeout)
		defer cancel()
		if _, derr := k.do(rctx, http.MethodDelete, k.base+"/"+url.PathEscape(l.InstanceID), l.Epoch, nil, nil); derr != nil {
			k.cfg.Log.Warn("registry deregistration failed; the lease will run out", "agent", k.cfg.Agent, "instance", l.InstanceID, "err", derr)
		}
		k.mu.Lock()
		k.held = false
		k.mu.Unlock()
	}
	return err
}

func (k *Keeper) run(ctx context.Context) {
	backoff := BackoffDefault
	fenced := false // a 412 ended our own registration: a 409 now means we were replaced
	for ctx.Err() == nil {
		l, held := k.Lease()
		if !held {
			wait, err := k.register(ctx)
			switch {
			case err == nil:
				backoff = BackoffDefault
				fenced = false
				continue
			case errors.Is(err, errTaken) && fenced:
				k.supersede()
				return
			case wait > 0:
			default:
				wait = rand.N(backoff) + time.Millisecond //nolint:gosec // jitter needs no cryptographic randomness
				backoff = min(2*backoff, BackoffMax)
			}
			sleep(ctx, wait)
			continue
		}
		sleep(ctx, jittered(k.heartbeat(l)))
		if ctx.Err() != nil {
			return
		}
		wait, err := k.renew(ctx, l)
		switch {
		case errors.Is(err, ErrStale):
			fenced = true
		case wait > 0:
			sleep(ctx, wait)
		}
	}
}

func (k *Keeper) heartbeat(l registry.Lease) time.Duration {
	if k.cfg.Heartbeat > 0 {
		return k.cfg.Heartbeat
	}
	if l.HeartbeatSeconds > 0 {
		return time.Duration(l.HeartbeatSeconds * float64(time.Second))
	}
	return 10 * time.Second
}

func jittered(d time.Duration) time.Duration {
	f := 1 - Jitter + 2*Jitter*rand.Float64() //nolint:gosec // jitter needs no cryptographic randomness
	return time.Duration(float64(d) * f)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (k *Keeper) supersede() {
	k.supersededOnce.Do(func() {
		k.mu.Lock()
		k.held = false
		k.mu.Unlock()
		k.cfg.Log.Error("registry: a replacement holds this instance; no longer registering", "agent", k.cfg.Agent,
			"instance", k.cfg.Registration.InstanceID)
		if k.cfg.Hooks.Superseded != nil {
			k.cfg.Hooks.Superseded()
		}
		close(k.superseded)
	})
}

// register posts the registration; wait is a shed answer's Retry-After.
func (k *Keeper) register(ctx context.Context) (time.Duration, error) {
	body, err := json.Marshal(k.cfg.Registration)
	if err != nil {
		return 0, err
	}
	var l registry.Lease
	resp, err := k.do(ctx, http.MethodPost, k.base, 0, body, &l)
	switch {
	case err == nil:
		k.registrations.Add(1)
		k.mu.Lock()
		k.lease, k.held = l, true
		if k.cfg.Registration.InstanceID == "" {
			// The same ID next time: a registration after a 412 takes the instance over.
			k.cfg.Registration.InstanceID = l.InstanceID
		}
		k.mu.Unlock()
		k.cfg.Log.Info("registry: registered", "agent", k.cfg.Agent, "instance", l.InstanceID, "epoch", l.Epoch)
		if k.cfg.Hooks.Registered != nil {
			k.cfg.Hooks.Registered(l)
		}
		return 0, nil
	case resp.status == http.StatusConflict:
		err = errTaken
	}
	return k.failed("register", resp, err), err
}

// renew renews l; wait is a shed answer's Retry-After.
func (k *Keeper) renew(ctx context.Context, l registry.Lease) (time.Duration, error) {
	var got registry.Lease
	resp, err := k.do(ctx, http.MethodPut, k.base+"/"+url.PathEscape(l.InstanceID), l.Epoch, nil, &got)
	switch {
	case err == nil:
		k.renewals.Add(1)
		k.mu.Lock()
		if k.held && k.lease.Epoch == l.Epoch {
			k.lease = got
		}
		k.mu.Unlock()
		if k.cfg.Hooks.Renewed != nil {
			k.cfg.Hooks.Renewed(got)
		}
		return 0, nil
	case resp.status == http.StatusPreconditionFailed:
		k.stale.Add(1)
		k.mu.Lock()
		k.held = false
		k.mu.Unlock()
		k.cfg.Log.Warn("registry: renewal refused as stale; registering again", "agent", k.cfg.Agent,
			"instance", l.InstanceID, "epoch", l.Epoch)
		if k.cfg.Hooks.Stale != nil {
			k.cfg.Hooks.Stale(l.Epoch)
		}
		return 0, ErrStale
	}
	return k.failed("renew", resp, err), err
}

// failed counts and reports a failed request and returns its Retry-After when it was shed.
func (k *Keeper) failed(op string, resp response, err error) time.Duration {
	if resp.status == http.StatusServiceUnavailable {
		k.shed.Add(1)
	} else {
		k.errs.Add(1)
	}
	k.cfg.Log.Debug("registry request failed", "op", op, "agent", k.cfg.Agent, "status", resp.status, "err", err)
	if k.cfg.Hooks.Failed != nil {
		k.cfg.Hooks.Failed(op, resp.status, err)
	}
	if resp.retryAfter > 0 {
		// Spread the herd that was told the same second over the second after it.
		return resp.retryAfter + rand.N(time.Second) //nolint:gosec // jitter needs no cryptographic randomness
	}
	return 0
}

type response struct {
	status     int
	retryAfter time.Duration
}

// do makes one request within RequestTimeout; a non-2xx answer is an error naming its problem.
func (k *Keeper) do(ctx context.Context, method, u string, epoch int64, body []byte, out any) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if epoch > 0 {
		req.Header.Set("If-Match", `"`+strconv.FormatInt(epoch, 10)+`"`)
	}
	if k.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+k.cfg.APIKey)
	}
	resp, err := k.cfg.HTTP.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	r := response{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		r.retryAfter = time.Duration(s) * time.Second
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		var p struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		return r, fmt.Errorf("%s %s: %d %s: %s", method, u, resp.StatusCode, p.Type, p.Detail)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return r, fmt.Errorf("%s %s: decode: %w", method, u, err)
		}
	}
	return r, nil
}
