package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/loadtest/internal/scrape"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/sse"
)

// BacklogAgeMetric is the gauge the generator scrapes from /metrics.
const BacklogAgeMetric = "turnstile_backlog_age_seconds"

// Config tunes a Generator. Zero values mean the documented defaults.
type Config struct {
	// IntakeURL is the base URL of intake (POST /v1/sessions/{id}/turns).
	IntakeURL string
	// GatewayURL is the base URL of the gateway. Defaults to IntakeURL.
	GatewayURL string
	// MetricsURLs are scraped every second for BacklogAgeMetric (the largest value wins).
	MetricsURLs []string
	// RunID names this run's sessions ("lt-<RunID>-<n>"). Defaults to a random one.
	RunID string
	// TurnsPerSession is how many turns a session receives. Defaults to 4.
	TurnsPerSession int
	// Window is how many sessions receive turns at once. Defaults to 64.
	Window int
	// Knobs are the demo agent knobs of every turn.
	Knobs demo.Knobs
	// PostTimeout bounds one POST. Defaults to 30s.
	PostTimeout time.Duration
	// Seed makes the arrival times reproducible. Defaults to the clock.
	Seed uint64
}

// Generator runs one load test. Its methods are safe for concurrent use.
type Generator struct {
	cfg   Config
	hc    *http.Client
	start time.Time
	rng   *rand.Rand

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	arrivals atomic.Int64 // index of the next arrival

	mu       sync.Mutex
	sessions map[int]*session
	turns    map[string]*turn
	timeline []Second
	refused  map[string]int
	issues   issues
	backlog  backlogState
	// outstanding counts accepted turns without a terminal event seen yet.
	outstanding int
	idle        chan struct{} // closed and replaced when outstanding drops to zero
}

type backlogState struct {
	present, scraped bool
	lastErr          string
}

// Second is one second of the run's timeline.
type Second struct {
	T           int      `json:"t"`
	Phase       string   `json:"phase,omitempty"`
	Arrivals    int      `json:"arrivals"`
	Accepted    int      `json:"accepted"`
	Refused     int      `json:"refused"`
	Completions int      `json:"completions"`
	Outstanding int      `json:"outstanding"`
	BacklogAge  *float64 `json:"backlog_age_seconds,omitempty"`
}

type session struct {
	id     string
	n      int
	turns  []*turn // in posting order
	posted int     // posts started
	closed bool    // no more posts will come
	cancel context.CancelFunc
	done   chan struct{}

	// openAt is when the session's stream first answered 200 (under Generator.mu): a turn posted
	// after it has its events timed from a reader already waiting, as a browser's would be.
	openAt time.Time

	// stream state, owned by the session's reader goroutine
	lastID  string
	running *turn // the turn whose attempt is open on the stream
	order   []*turn
}

type turn struct {
	id       string
	sess     *session
	text     string
	sentAt   time.Time
	answered time.Time // when its POST's answer came back (zero while in flight or on a transport error)
	accepted bool
	status   int

	firstEvent time.Time
	// started and firstDelta are when the first attempt's turn.started and first turn.delta
	// arrived.
	started    time.Time
	firstDelta time.Time
	terminal   time.Time
	terminals  int
	attempt    int
	nextIndex  int
	output     string
	finalType  string
}

// New returns a generator; call Start, then Arrive for each phase, then Finish.
func New(cfg Config) *Generator {
	if cfg.GatewayURL == "" {
		cfg.GatewayURL = cfg.IntakeURL
	}
	if cfg.RunID == "" {
		cfg.RunID = strconv.FormatInt(time.Now().UnixNano()%1e10, 36)
	}
	if cfg.TurnsPerSession == 0 {
		cfg.TurnsPerSession = 4
	}
	if cfg.Window == 0 {
		cfg.Window = 64
	}
	if cfg.PostTimeout == 0 {
		cfg.PostTimeout = 30 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4096
	tr.MaxIdleConnsPerHost = 4096
	return &Generator{
		cfg:      cfg,
		hc:       &http.Client{Transport: tr},
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), //nolint:gosec // a seeded, reproducible arrival schedule, not a secret
		sessions: map[int]*session{},
		turns:    map[string]*turn{},
		refused:  map[string]int{},
		idle:     make(chan struct{}),
	}
}

// SessionPrefix is the prefix of every session ID of this run.
func (g *Generator) SessionPrefix() string { return "lt-" + g.cfg.RunID + "-" }

// Start starts the clock and the metrics scraper.
func (g *Generator) Start(ctx context.Context) {
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.start = time.Now()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.scrapeLoop(g.ctx)
	}()
}

// Elapsed is the time since Start.
func (g *Generator) Elapsed() time.Duration { return time.Since(g.start) }

func (g *Generator) secondLocked(at time.Time) *Second {
	s := int(at.Sub(g.start) / time.Second)
	s = max(s, 0)
	for len(g.timeline) <= s {
		g.timeline = append(g.timeline, Second{T: len(g.timeline), Outstanding: g.outstanding})
	}
	return &g.timeline[s]
}

func (g *Generator) scrapeLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var age *float64
			var present bool
			var lastErr string
			for _, u := range g.cfg.MetricsURLs {
				sctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
				v, ok, err := scrape.Fetch(sctx, g.hc, u, BacklogAgeMetric)
				cancel()
				if err != nil {
					lastErr = err.Error()
					continue
				}
				if ok {
					present = true
					if age == nil || v > *age {
						age = &v
					}
				}
			}
			g.mu.Lock()
			sec := g.secondLocked(now)
			sec.Outstanding = g.outstanding
			sec.BacklogAge = age
			g.backlog.scraped = g.backlog.scraped || len(g.cfg.MetricsURLs) > 0
			g.backlog.present = g.backlog.present || present
			if lastErr != "" {
				g.backlog.lastErr = lastErr
			}
			g.mu.Unlock()
		}
	}
}

// Arrive posts turns at rate per second (Poisson arrivals) for d, then returns. Each post runs in
// its own goroutine: a slow server never delays the next arrival.
func (g *Generator) Arrive(ctx context.Context, phase string, rate float64, d time.Duration) {
	if rate <= 0 || d <= 0 {
		return
	}
	begin := time.Now()
	end := begin.Add(d)
	next := begin
	g.mu.Lock()
	g.secondLocked(begin).Phase = phase
	g.mu.Unlock()
	for {
		next = next.Add(time.Duration(g.rng.ExpFloat64() / rate * float64(time.Second)))
		if next.After(end) {
			break
		}
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		g.arrive() //nolint:contextcheck // each post runs under the generator's own context, which outlives the arrival schedule
	}
	if wait := time.Until(end); wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// arrive schedules one turn.
func (g *Generator) arrive() {
	i := int(g.arrivals.Add(1) - 1)
	w, k := g.cfg.Window, g.cfg.TurnsPerSession
	n := i%w + w*(i/(w*k))
	now := time.Now()
	g.mu.Lock()
	s := g.sessions[n]
	if s == nil {
		s = &session{id: g.SessionPrefix() + strconv.Itoa(n), n: n, done: make(chan struct{})}
		g.sessions[n] = s
		ctx, cancel := context.WithCancel(g.ctx)
		s.cancel = cancel
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer close(s.done)
			g.follow(ctx, s)
		}()
	}
	t := &turn{
		id: uuid.Must(uuid.NewV7()).String(), sess: s, sentAt: now,
		text: "load test turn " + strconv.Itoa(i),
	}
	s.turns = append(s.turns, t)
	s.posted++
	if s.posted >= k {
		s.closed = true
	}
	g.turns[t.id] = t
	g.secondLocked(now).Arrivals++
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.post(t)
	}()
}

func (g *Generator) post(t *turn) {
	body, _ := json.Marshal(map[string]any{
		"input":    map[string]string{"text": t.text},
		"metadata": map[string]any{"demo": g.cfg.Knobs},
		"turn_id":  t.id,
	})
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.PostTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
		g.cfg.IntakeURL+"/v1/sessions/"+url.PathEscape(t.sess.id)+"/turns", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	status, problem := 0, ""
	if err == nil {
		if resp.StatusCode != http.StatusAccepted {
			// A refusal is a problem document; its type says which limit refused the turn.
			var p struct {
				Type string `json:"type"`
			}
			_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&p)
			problem = path.Base(p.Type)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		status = resp.StatusCode
	}
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	t.status = status
	if err == nil {
		t.answered = now
	}
	sec := g.secondLocked(now)
	switch {
	case status == http.StatusAccepted:
		t.accepted = true
		g.issues.intake = append(g.issues.intake, now.Sub(t.sentAt))
		sec.Accepted++
		if t.terminals == 0 {
			g.outstanding++
		}
	case err != nil:
		sec.Refused++
		g.refused["transport_error"]++
	default:
		sec.Refused++
		key := strconv.Itoa(status)
		if problem != "" && problem != "." && problem != "/" {
			key += " " + problem
		}
		g.refused[key]++
	}
	g.maybeCloseLocked(t.sess)
}

// CloseSessions marks every session as receiving no more turns, so their streams end once their
// turns are terminal.
func (g *Generator) CloseSessions() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sessions {
		s.closed = true
		g.maybeCloseLocked(s)
	}
}

// maybeCloseLocked ends a session's stream when no more turns will come and every posted turn has
// an answer and, if accepted, its terminal event.
func (g *Generator) maybeCloseLocked(s *session) {
	if !s.closed {
		return
	}
	for _, t := range s.turns {
		if t.status == 0 && t.terminals == 0 {
			return // post still in flight
		}
		if t.accepted && t.terminals == 0 {
			return
		}
	}
	s.cancel()
}

// follow reads the session's stream from its start, resuming with Last-Event-ID when it closes.
func (g *Generator) follow(ctx context.Context, s *session) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := g.readStream(ctx, s)
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		if err != nil {
			g.issues.streamErrors++
			g.issues.note("stream %s: %v", s.id, err)
		} else {
			g.issues.reconnects++
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (g *Generator) readStream(ctx context.Context, s *session) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.GatewayURL+"/v1/sessions/"+url.PathEscape(s.id)+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	g.mu.Lock()
	if s.openAt.IsZero() {
		s.openAt = time.Now()
	}
	g.mu.Unlock()
	r := sse.NewReader(resp.Body, 0)
	for {
		ev, err := r.Next()
		if err != nil {
			// A stream cut inside an event ends like one closed between events: the session
			// resumes from its last event ID either way.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
		if ev.ID != "" {
			s.lastID = ev.ID
		}
		g.onEvent(s, ev)
	}
}

type eventData struct {
	TurnID  string `json:"turn_id"`
	Attempt int    `json:"attempt"`
	Index   int    `json:"index"`
	Text    string `json:"text"`
	Output  struct {
		Text string `json:"text"`
	} `json:"output"`
}

func (g *Generator) onEvent(s *session, ev sse.Event) {
	now := time.Now()
	var d eventData
	if ev.Type == "stream.reset" {
		g.mu.Lock()
		g.issues.resets++
		g.issues.note("stream %s: stream.reset", s.id)
		g.mu.Unlock()
		return
	}
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		g.mu.Lock()
		g.issues.badEvents++
		g.issues.note("stream %s: undecodable %s data: %v", s.id, ev.Type, err)
		g.mu.Unlock()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.turns[d.TurnID]
	if t == nil || t.sess != s {
		g.issues.unknown++
		g.issues.note("stream %s: %s for a turn this run did not post: %s", s.id, ev.Type, d.TurnID)
		return
	}
	if t.firstEvent.IsZero() {
		t.firstEvent = now
	}
	if t.terminals > 0 {
		g.issues.repeated++
		g.issues.note("turn %s: %s after its terminal event", t.id, ev.Type)
		return
	}
	want := demo.Reply(t.text, g.cfg.Knobs)
	switch ev.Type {
	case "turn.started", "turn.retrying":
		if s.running != nil && s.running != t {
			g.issues.reordered++
			g.issues.note("session %s: turn %s started while turn %s was not terminal", s.id, t.id, s.running.id)
		}
		if ev.Type == "turn.started" {
			if d.Attempt == t.attempt {
				g.issues.repeated++
				g.issues.note("turn %s: turn.started twice for attempt %d", t.id, d.Attempt)
			}
			if t.attempt == 0 {
				s.order = append(s.order, t)
				t.started = now
			}
			if t.attempt > 0 {
				g.issues.retries++
			}
			t.attempt, t.nextIndex = d.Attempt, 0
		}
		s.running = t
	case "turn.delta":
		if d.Attempt != t.attempt {
			g.issues.reordered++
			g.issues.note("turn %s: delta of attempt %d during attempt %d", t.id, d.Attempt, t.attempt)
			return
		}
		switch {
		case d.Index < t.nextIndex:
			g.issues.repeated++
			g.issues.note("turn %s: delta %d repeated (next expected %d)", t.id, d.Index, t.nextIndex)
		case d.Index > t.nextIndex:
			g.issues.lostEvents++
			g.issues.note("turn %s: delta %d arrived, expected %d", t.id, d.Index, t.nextIndex)
			t.nextIndex = d.Index + 1
		default:
			if d.Index >= len(want) || want[d.Index] != d.Text {
				g.issues.wrong++
				g.issues.note("turn %s: delta %d is %q, predicted otherwise", t.id, d.Index, d.Text)
			}
			if t.firstDelta.IsZero() {
				t.firstDelta = now
			}
			t.nextIndex++
		}
	case "turn.waiting":
		// Informational: the turn waits on its upstream (a rate limit, a retry pause, a full
		// concurrency limit) and goes on with its usual events.
	case "turn.tool_call", "turn.tool_result":
	case "turn.completed", "turn.failed", "turn.cancelled", "turn.expired":
		t.terminals++
		t.terminal = now
		t.finalType = ev.Type
		t.output = d.Output.Text
		if s.running == t {
			s.running = nil
		}
		if ev.Type != "turn.completed" {
			g.issues.failed++
			g.issues.note("turn %s ended with %s", t.id, ev.Type)
		} else {
			if t.nextIndex != len(want) {
				g.issues.lostEvents++
				g.issues.note("turn %s: completed after %d of %d deltas", t.id, t.nextIndex, len(want))
			}
			if d.Output.Text != demo.Output(t.text, g.cfg.Knobs) {
				g.issues.wrong++
				g.issues.note("turn %s: output %q differs from the prediction", t.id, d.Output.Text)
			}
		}
		g.secondLocked(now).Completions++
		if t.accepted {
			g.outstanding--
			if g.outstanding == 0 {
				close(g.idle)
				g.idle = make(chan struct{})
			}
		}
		g.maybeCloseLocked(s)
	default:
		g.issues.badEvents++
		g.issues.note("stream %s: unexpected event type %q", s.id, ev.Type)
	}
}

// Outstanding is the number of accepted turns whose terminal event has not been seen yet.
func (g *Generator) Outstanding() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.outstanding
}

// Counts is a progress snapshot.
type Counts struct {
	Arrivals, Accepted, Refused, Completed, Outstanding int
	BacklogAge                                          *float64
}

// Snapshot returns running totals.
func (g *Generator) Snapshot() Counts {
	g.mu.Lock()
	defer g.mu.Unlock()
	var c Counts
	for _, s := range g.timeline {
		c.Arrivals += s.Arrivals
		c.Accepted += s.Accepted
		c.Refused += s.Refused
		c.Completed += s.Completions
		if s.BacklogAge != nil {
			c.BacklogAge = s.BacklogAge
		}
	}
	c.Outstanding = g.outstanding
	return c
}

// WaitIdle waits until every accepted turn has its terminal event and no post is in flight, or
// timeout passes; it reports whether the generator went idle.
func (g *Generator) WaitIdle(ctx context.Context, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		inflight := 0
		for _, t := range g.turns {
			if t.status == 0 && t.terminals == 0 {
				inflight++
			}
		}
		idle, ch := g.outstanding == 0 && inflight == 0, g.idle
		g.mu.Unlock()
		if idle {
			return true
		}
		poll := time.NewTimer(100 * time.Millisecond) // posts in flight have no signal of their own
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			poll.Stop()
			return false
		case <-ctx.Done():
			poll.Stop()
			return false
		}
		poll.Stop()
	}
}

// CompletionRate is the number of terminal events per second seen between two offsets from Start.
func (g *Generator) CompletionRate(from, to time.Duration) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, b := int(from/time.Second), int(to/time.Second)
	n := 0
	for i := a; i < b && i < len(g.timeline); i++ {
		n += g.timeline[i].Completions
	}
	if b <= a {
		return 0
	}
	return float64(n) / float64(b-a)
}

// BusyRate is the completion rate between the first and the last second with completions in
// [from, to), leaving out those two edge seconds: the rate at which the workers drained a backlog.
// When every completion fell within two seconds (a short calibration that fast workers kept up
// with, or one whose start the workers were late for), there are no inner seconds; the rate is
// then the completions over the seconds they fell in, a lower bound, rather than none.
func (g *Generator) BusyRate(from, to time.Duration) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	first, last, n := -1, -1, 0
	for i := int(from / time.Second); i < int(to/time.Second) && i < len(g.timeline); i++ {
		if g.timeline[i].Completions > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return 0
	}
	if last-first < 2 {
		for i := first; i <= last; i++ {
			n += g.timeline[i].Completions
		}
		return float64(n) / float64(last-first+1)
	}
	for i := first + 1; i < last; i++ {
		n += g.timeline[i].Completions
	}
	return float64(n) / float64(last-first-1)
}

// Stop ends every stream and the scraper and waits for the generator's goroutines.
func (g *Generator) Stop() {
	g.cancel()
	g.wg.Wait()
	g.hc.CloseIdleConnections()
}

// QuantilesOf summarises durations in milliseconds.
func QuantilesOf(ds []time.Duration) Quantiles { return quantiles(ds) }

// quantiles of durations in milliseconds.
func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i].Microseconds()) / 1000
	}
	return Quantiles{N: len(s), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: q(1)}
}

// Quantiles summarise a latency distribution in milliseconds.
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}
