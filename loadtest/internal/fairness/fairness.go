package fairness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/demo"
)

// Config is one fairness scenario.
type Config struct {
	// Base is the stacks' configuration. Each run gets its own schema, key prefix and instance
	// (Base's with the run's name appended), its own embedded broker when Base names no brokers,
	// TURNSTILE_AUTH=on with an API key per tenant, and the run's scheduler.
	Base config.Config
	Log  *slog.Logger
	// NoisyTurns are posted at once by the noisy tenant over NoisySessions sessions, Posters
	// requests at a time.
	NoisyTurns, NoisySessions, Posters int
	// QuietTenants each post QuietRate turns a second for QuietFor, taking their QuietSessions
	// sessions in turn.
	QuietTenants, QuietSessions int
	QuietRate                   float64
	QuietFor                    time.Duration
	// TurnMs is how long the demo agent takes over each turn.
	TurnMs int
	// DrainMax bounds the wait for a run's turns to finish.
	DrainMax time.Duration
	// P99Margin and Fraction are the targets (Report.Check).
	P99Margin time.Duration
	Fraction  float64
	// Progress, when set, is told what each run is doing.
	Progress func(string)
}

// NoisyTenant is the noisy tenant's name; the quiet ones are QuietTenantName(0), (1), ….
const NoisyTenant = "a"

// QuietTenantName is the i-th quiet tenant's name: b, c, … (then q10, q11, … past z).
func QuietTenantName(i int) string {
	if i < 25 {
		return string(rune('b' + i))
	}
	return "q" + strconv.Itoa(i)
}

// Quantiles of a set of durations, in milliseconds.
type Quantiles struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Pass is one of the scenario's three runs.
type Pass struct {
	Name      string `json:"name"`
	Scheduler string `json:"scheduler"`
	Noisy     bool   `json:"noisy"`
	// Accepted turns (202) and Refused posts (by status, or "transport_error").
	Accepted int            `json:"accepted"`
	Refused  map[string]int `json:"refused,omitempty"`
	// Quiet is the quiet tenants' accept→start; NoisyWait the noisy tenant's.
	Quiet     Quantiles `json:"quiet_accept_to_start"`
	NoisyWait Quantiles `json:"noisy_accept_to_start"`
	// Seconds from the first acceptance to the last finish; TurnsPerSec every turn over them.
	Seconds     float64 `json:"seconds"`
	TurnsPerSec float64 `json:"turns_per_sec"`
	// The window: from a second after the quiet tenants' first acceptance to their last. Starts a
	// second of each side within it, and whether the noisy tenant still had turns waiting at its
	// end (its last start after it).
	WindowSec         float64 `json:"window_sec"`
	QuietStartsPerSec float64 `json:"quiet_starts_per_sec"`
	NoisyStartsPerSec float64 `json:"noisy_starts_per_sec"`
	// QuietRunning and NoisyRunning are each side's turns running on average in the window
	// (their started_at→finished_at overlap with it over its length).
	QuietRunning       float64 `json:"quiet_running"`
	NoisyRunning       float64 `json:"noisy_running"`
	NoisyBackloggedEnd bool    `json:"noisy_backlogged_at_window_end"`
	// Unfinished turns when DrainMax ran out.
	Unfinished int `json:"unfinished"`
}

// Report is the scenario's three runs and its targets.
type Report struct {
	Scenario string  `json:"scenario"`
	Config   Summary `json:"config"`
	Fair     Pass    `json:"fair"`
	Alone    Pass    `json:"alone"`
	Arrival  Pass    `json:"arrival"`
	// P99LimitMs is the alone run's quiet p99 plus the margin; P99Met the fair run's within it.
	P99LimitMs float64 `json:"p99_limit_ms"`
	P99Met     bool    `json:"p99_met"`
	// ThroughputRatio is the fair run's turns a second over the arrival-order run's.
	ThroughputRatio float64 `json:"throughput_ratio"`
	ThroughputMet   bool    `json:"throughput_met"`
	// LeftRunning is what the quiet tenants left of the worker's slots in the window: the turns
	// running on average in the arrival-order run's window (every slot the worker keeps busy)
	// less the fair run's quiet turns running; NoisyShareRatio is the fair run's noisy turns
	// running over it. Slots rather than starts a second: the rate of starts follows how much of
	// the machine the stack gets in each run, the slots it keeps busy do not.
	LeftRunning     float64  `json:"left_running"`
	NoisyShareRatio float64  `json:"noisy_share_ratio"`
	NoisyShareMet   bool     `json:"noisy_share_met"`
	Notes           []string `json:"notes,omitempty"`
}

// Summary is the scenario's shape, for the report.
type Summary struct {
	NoisyTurns    int     `json:"noisy_turns"`
	NoisySessions int     `json:"noisy_sessions"`
	QuietTenants  int     `json:"quiet_tenants"`
	QuietRate     float64 `json:"quiet_rate_per_tenant"`
	QuietSeconds  float64 `json:"quiet_seconds"`
	TurnMs        int     `json:"turn_ms"`
	MaxInflight   int     `json:"max_inflight"`
	Partitions    int     `json:"partitions"`
	P99MarginMs   float64 `json:"p99_margin_ms"`
	Fraction      float64 `json:"fraction"`
}

// Met reports whether every target was met and every turn accepted and finished.
func (r Report) Met() bool {
	return r.P99Met && r.ThroughputMet && r.NoisyShareMet && r.complete()
}

func (r Report) complete() bool {
	for _, run := range []Pass{r.Fair, r.Alone, r.Arrival} {
		if len(run.Refused) > 0 || run.Unfinished > 0 {
			return false
		}
	}
	return true
}

// Run runs the scenario: the quiet tenants alone, then beside the noisy tenant with the fair
// scheduler, then with the arrival-order one.
func Run(ctx context.Context, c Config) (Report, error) {
	r := Report{Scenario: "fairness", Config: Summary{
		NoisyTurns: c.NoisyTurns, NoisySessions: c.NoisySessions, QuietTenants: c.QuietTenants, QuietRate: c.QuietRate,
		QuietSeconds: c.QuietFor.Seconds(), TurnMs: c.TurnMs, MaxInflight: c.Base.MaxInflight, Partitions: c.Base.Partitions,
		P99MarginMs: ms(c.P99Margin), Fraction: c.Fraction,
	}}
	var err error
	if r.Alone, err = c.run(ctx, "alone", "fair", false); err != nil {
		return r, err
	}
	if r.Fair, err = c.run(ctx, "fair", "fair", true); err != nil {
		return r, err
	}
	if r.Arrival, err = c.run(ctx, "arrival", "arrival", true); err != nil {
		return r, err
	}
	r.evaluate()
	return r, nil
}

func (r *Report) evaluate() {
	r.P99LimitMs = r.Alone.Quiet.P99Ms + r.Config.P99MarginMs
	r.P99Met = r.Fair.Quiet.N > 0 && r.Fair.Quiet.P99Ms <= r.P99LimitMs
	if r.Arrival.TurnsPerSec > 0 {
		r.ThroughputRatio = r.Fair.TurnsPerSec / r.Arrival.TurnsPerSec
	}
	r.ThroughputMet = r.ThroughputRatio >= r.Config.Fraction
	r.LeftRunning = r.Arrival.QuietRunning + r.Arrival.NoisyRunning - r.Fair.QuietRunning
	if r.LeftRunning > 0 {
		r.NoisyShareRatio = r.Fair.NoisyRunning / r.LeftRunning
	}
	r.NoisyShareMet = r.NoisyShareRatio >= r.Config.Fraction
	if !r.Fair.NoisyBackloggedEnd || !r.Arrival.NoisyBackloggedEnd {
		r.Notes = append(r.Notes, "the noisy tenant's backlog ran out before the quiet tenants stopped posting: its share is measured over less than a saturated window")
	}
	for _, run := range []Pass{r.Alone, r.Fair, r.Arrival} {
		if len(run.Refused) > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: posts refused: %v", run.Name, run.Refused))
		}
		if run.Unfinished > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d turns unfinished after the drain", run.Name, run.Unfinished))
		}
	}
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// run is one run on a fresh stack.
func (c Config) run(ctx context.Context, name, scheduler string, noisy bool) (Pass, error) {
	run := Pass{Name: name, Scheduler: scheduler, Noisy: noisy}
	cfg := c.Base
	cfg.DatabaseSchema += "_" + name
	cfg.KeyPrefix += "-" + name
	cfg.InstanceID += "-" + name
	cfg.Worker.Scheduler = scheduler
	cfg.Auth.Mode = "on"
	if cfg.Auth.StreamTokenKeys == "" {
		// Stream tokens are not used (the turns are read from Postgres); a key of the run's own.
		cfg.Auth.StreamTokenKeys = "k1:" + base64.StdEncoding.EncodeToString(randomBytes(32))
	}
	if err := cfg.Validate(); err != nil {
		return run, err
	}
	c.progress("%s: starting a stack (scheduler %s)", name, scheduler)
	st, err := stack.Start(ctx, cfg, "intake,worker", c.Log)
	if err != nil {
		return run, err
	}
	defer func() { _ = st.Stop(context.WithoutCancel(ctx), false) }()
	p := newPoster(st.URL, c.TurnMs, max(c.Posters, c.QuietTenants*int(c.QuietRate+1)*4))
	defer p.hc.CloseIdleConnections()
	if err := waitReady(ctx, p.hc, st.URL, time.Minute); err != nil {
		return run, err
	}
	keys := map[string]string{}
	tenants := []string{NoisyTenant}
	for i := range c.QuietTenants {
		tenants = append(tenants, QuietTenantName(i))
	}
	for _, t := range tenants {
		if _, keys[t], err = apikey.Create(ctx, st.Pool, t); err != nil {
			return run, err
		}
	}
	// The noisy tenant's turns first, at once, as fast as intake takes them; then the quiet
	// tenants post while that backlog is queued. Posting them meanwhile would measure intake's
	// share of the machine while it takes the burst (every turn's accept→start then includes the
	// wait for the broker and the worker to get a core), not the order the worker starts turns in.
	var wg sync.WaitGroup
	if noisy {
		c.progress("%s: tenant %s posts %d turns over %d sessions", name, NoisyTenant, c.NoisyTurns, c.NoisySessions)
		next := make(chan int)
		for range max(c.Posters, 1) {
			wg.Go(func() {
				for i := range next {
					p.post(ctx, keys[NoisyTenant], fmt.Sprintf("%s-%04d", NoisyTenant, i%c.NoisySessions))
				}
			})
		}
		wg.Go(func() {
			defer close(next)
			for i := range c.NoisyTurns {
				select {
				case next <- i:
				case <-ctx.Done():
					return
				}
			}
		})
		wg.Wait()
		n, _ := p.counts()
		c.progress("%s: %d of tenant %s's turns accepted; %d tenants post %.1f/s each for %v", name, n, NoisyTenant, c.QuietTenants, c.QuietRate, c.QuietFor)
	} else {
		c.progress("%s: %d tenants post %.1f/s each for %v", name, c.QuietTenants, c.QuietRate, c.QuietFor)
	}
	for q := range c.QuietTenants {
		tenant := QuietTenantName(q)
		wg.Go(func() { p.paced(ctx, keys[tenant], tenant, c.QuietSessions, c.QuietRate, c.QuietFor) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return run, err
	}
	run.Accepted, run.Refused = p.counts()
	c.progress("%s: %d accepted; waiting for them to finish", name, run.Accepted)
	if run.Unfinished, err = waitFinished(ctx, st.Pool, run.Accepted, c.DrainMax); err != nil {
		return run, err
	}
	rows, err := readTurns(ctx, st.Pool)
	if err != nil {
		return run, err
	}
	measure(&run, rows)
	c.progress("%s: quiet accept→start p50 %.0f ms p99 %.0f ms; %.1f turns/s", name, run.Quiet.P50Ms, run.Quiet.P99Ms, run.TurnsPerSec)
	return run, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// waitReady waits for the stack's /readyz to answer 200: the worker has joined its group, so a
// quiet turn's wait does not include the join.
func waitReady(ctx context.Context, hc *http.Client, base string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the stack was not ready within %v", timeout)
		case <-t.C:
		}
	}
}

// poster posts turns and counts the answers.
type poster struct {
	hc   *http.Client
	base string
	body []byte

	mu       sync.Mutex
	accepted int
	refused  map[string]int
}

func newPoster(base string, turnMs, conns int) *poster {
	body, _ := json.Marshal(map[string]any{
		"input":    map[string]string{"text": "how fair is this"},
		"metadata": map[string]any{"demo": demo.Knobs{Tokens: 3, DurationMs: turnMs}},
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns
	return &poster{hc: &http.Client{Transport: tr, Timeout: time.Minute}, base: base, body: body, refused: map[string]int{}}
}

func (p *poster) post(ctx context.Context, key, session string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/v1/sessions/"+url.PathEscape(session)+"/turns", bytes.NewReader(p.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := p.hc.Do(req)
	status := "transport_error"
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		status = strconv.Itoa(resp.StatusCode)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == "202" {
		p.accepted++
	} else {
		p.refused[status]++
	}
}

// paced posts rate turns a second for d, one goroutine a post so a slow answer does not delay
// the next, taking sessions of the tenant in turn.
func (p *poster) paced(ctx context.Context, key, tenant string, sessions int, rate float64, d time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	end := time.Now().Add(d)
	for i := 0; ; i++ {
		session := fmt.Sprintf("%s-%02d", tenant, i%max(sessions, 1))
		wg.Go(func() { p.post(ctx, key, session) })
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if !now.Before(end) {
				return
			}
		}
	}
}

func (p *poster) counts() (int, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var refused map[string]int
	if len(p.refused) > 0 {
		refused = maps.Clone(p.refused)
	}
	return p.accepted, refused
}

// waitFinished waits until want turns have finished or timeout passed, and returns how many
// were unfinished then.
func waitFinished(ctx context.Context, pool *pgxpool.Pool, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE finished_at IS NOT NULL`).Scan(&done); err != nil {
			return 0, err
		}
		if done >= want || !time.Now().Before(deadline) {
			return max(want-done, 0), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// row is one turn as Postgres recorded it.
type row struct {
	tenant                      string
	accepted, started, finished time.Time
}

func readTurns(ctx context.Context, pool *pgxpool.Pool) ([]row, error) {
	rs, err := pool.Query(ctx, `SELECT tenant, accepted_at, started_at, finished_at FROM turns WHERE started_at IS NOT NULL AND finished_at IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.tenant, &r.accepted, &r.started, &r.finished); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no finished turns")
	}
	return out, nil
}

// measure fills run's figures from its turns.
func measure(run *Pass, rows []row) {
	var quiet, noisy []time.Duration
	first, last := rows[0].accepted, rows[0].finished
	var qFirst, qLast time.Time
	for _, r := range rows {
		if r.accepted.Before(first) {
			first = r.accepted
		}
		if r.finished.After(last) {
			last = r.finished
		}
		if r.tenant == NoisyTenant {
			noisy = append(noisy, r.started.Sub(r.accepted))
			continue
		}
		quiet = append(quiet, r.started.Sub(r.accepted))
		if qFirst.IsZero() || r.accepted.Before(qFirst) {
			qFirst = r.accepted
		}
		if r.accepted.After(qLast) {
			qLast = r.accepted
		}
	}
	run.Quiet, run.NoisyWait = quantiles(quiet), quantiles(noisy)
	run.Seconds = last.Sub(first).Seconds()
	if run.Seconds > 0 {
		run.TurnsPerSec = float64(len(rows)) / run.Seconds
	}
	// The window leaves out the first second, while the noisy tenant's backlog builds.
	from, to := qFirst.Add(time.Second), qLast
	if !to.After(from) {
		return
	}
	run.WindowSec = to.Sub(from).Seconds()
	var q, n int
	var qRun, nRun time.Duration
	var noisyLast time.Time
	for _, r := range rows {
		in := !r.started.Before(from) && r.started.Before(to)
		overlap := max(minTime(r.finished, to).Sub(maxTime(r.started, from)), 0)
		if r.tenant == NoisyTenant {
			nRun += overlap
		} else {
			qRun += overlap
		}
		switch {
		case r.tenant != NoisyTenant:
			if in {
				q++
			}
		default:
			if in {
				n++
			}
			if r.started.After(noisyLast) {
				noisyLast = r.started
			}
		}
	}
	run.QuietStartsPerSec, run.NoisyStartsPerSec = float64(q)/run.WindowSec, float64(n)/run.WindowSec
	run.QuietRunning, run.NoisyRunning = qRun.Seconds()/run.WindowSec, nRun.Seconds()/run.WindowSec
	run.NoisyBackloggedEnd = noisyLast.After(to)
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ms(ds[min(int(q*float64(len(ds))), len(ds)-1)]) }
	return Quantiles{N: len(ds), P50Ms: at(0.50), P99Ms: at(0.99)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
