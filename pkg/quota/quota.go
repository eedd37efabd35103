// Package quota holds the runtime quotas of tenants and tenant×agent pairs (max running turns,
// accepted turns per second, a token budget per period), set through /v1/admin/quotas and stored
// in Postgres (table tenant_quotas), and the token usage a succeeded turn records (table
// token_usage, filled by the statement that marks the turn succeeded, pkg/turnstore's
// complete.sql).
//
// A Watcher re-reads the quotas, the running turns per tenant and agent, and each budgeted
// tenant's usage in its current period every refresh interval (TURNSTILE_QUOTA_REFRESH): a change
// made through the API is in force on every worker and intake replica within about one interval,
// with no restart. Workers hold a tenant at its running cap (Counter's limiters, one per agent
// lane); intake refuses a tenant past its budget (429 budget-exhausted) and applies its rate.
//
// A running cap spans replicas: each worker counts its own starts exactly and adds the other
// replicas' running turns as of the last refresh. Between two refreshes replicas do not see each
// other's new starts, so a tenant may pass its cap by the starts other replicas make within one
// interval; it falls back under it at the next.
package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Periods of a budget.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Quota is one row of tenant_quotas. A nil limit is no limit.
type Quota struct {
	Tenant string `json:"tenant"`
	// Agent is "" for the tenant's quota over all its agents, else the tenant×agent quota.
	Agent      string `json:"agent,omitempty"`
	MaxRunning *int   `json:"max_running,omitempty"`
	// RatePerSecond bounds the turns accepted per second: the tenant's over every agent, or with
	// Agent the tenant's turns of that agent, beside the tenant's own rate.
	RatePerSecond *int `json:"rate_per_second,omitempty"`
	// BudgetTokens bounds the tokens the tenant's turns may spend per BudgetPeriod (UTC day or
	// month); only the tenant's quota over all agents carries one.
	BudgetTokens *int64    `json:"budget_tokens,omitempty"`
	BudgetPeriod string    `json:"budget_period,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// ErrInvalid wraps the reason a quota cannot be stored.
var ErrInvalid = errors.New("invalid quota")

// Check returns an error wrapping ErrInvalid when q cannot be stored.
func (q Quota) Check() error {
	switch {
	case q.MaxRunning != nil && *q.MaxRunning < 0:
		return fmt.Errorf("%w: max_running must be at least 0", ErrInvalid)
	case q.RatePerSecond != nil && *q.RatePerSecond < 1:
		return fmt.Errorf("%w: rate_per_second must be at least 1", ErrInvalid)
	case q.BudgetTokens != nil && *q.BudgetTokens < 0:
		return fmt.Errorf("%w: budget_tokens must be at least 0", ErrInvalid)
	case q.BudgetTokens != nil && q.Agent != "":
		return fmt.Errorf("%w: a budget is the tenant's, over every agent: set it without agent", ErrInvalid)
	case q.BudgetTokens != nil && q.BudgetPeriod != PeriodDay && q.BudgetPeriod != PeriodMonth:
		return fmt.Errorf("%w: budget_period must be day or month", ErrInvalid)
	case q.BudgetTokens == nil && q.BudgetPeriod != "":
		return fmt.Errorf("%w: budget_period needs budget_tokens", ErrInvalid)
	}
	return nil
}

// PeriodStart is the start of the budget period that holds now (UTC), and Reset the start of the
// next one: when a tenant past its budget may be admitted again.
func PeriodStart(period string, now time.Time) time.Time {
	now = now.UTC()
	if period == PeriodMonth {
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
}

// Reset is the start of the period after the one that holds now.
func Reset(period string, now time.Time) time.Time {
	start := PeriodStart(period, now)
	if period == PeriodMonth {
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// Store reads and writes quotas and usage.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a store over pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const quotaColumns = `tenant, agent, max_running, rate_per_second, budget_tokens, coalesce(budget_period, ''), updated_at`

func scanQuotas(rows pgx.Rows) ([]Quota, error) {
	defer rows.Close()
	var out []Quota
	for rows.Next() {
		var q Quota
		if err := rows.Scan(&q.Tenant, &q.Agent, &q.MaxRunning, &q.RatePerSecond, &q.BudgetTokens, &q.BudgetPeriod, &q.UpdatedAt); err != nil {
			return nil, fmt.Errorf("read quotas: %w", err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read quotas: %w", err)
	}
	return out, nil
}

// List returns the quotas, of one tenant unless tenant is "".
func (s *Store) List(ctx context.Context, tenant string) ([]Quota, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+quotaColumns+` FROM tenant_quotas WHERE $1 = '' OR tenant = $1 ORDER BY tenant, agent`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read quotas: %w", err)
	}
	return scanQuotas(rows)
}

// Put stores q (replacing the tenant's and agent's quota) and returns it as stored.
func (s *Store) Put(ctx context.Context, q Quota) (Quota, error) {
	if err := q.Check(); err != nil {
		return Quota{}, err
	}
	var period *string
	if q.BudgetPeriod != "" {
		period = &q.BudgetPeriod
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO tenant_quotas AS q (tenant, agent, max_running, rate_per_second, budget_tokens, budget_period)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant, agent) DO UPDATE SET max_running = EXCLUDED.max_running, rate_per_second = EXCLUDED.rate_per_second,
    budget_tokens = EXCLUDED.budget_tokens, budget_period = EXCLUDED.budget_period, updated_at = now()
RETURNING `+quotaColumns, q.Tenant, q.Agent, q.MaxRunning, q.RatePerSecond, q.BudgetTokens, period)
	if err != nil {
		return Quota{}, fmt.Errorf("store quota: %w", err)
	}
	out, err := scanQuotas(rows)
	if err != nil || len(out) != 1 {
		return Quota{}, fmt.Errorf("store quota: %w", errors.Join(err, errors.New("no row returned")))
	}
	return out[0], nil
}

// Delete removes the tenant's and agent's quota; it reports whether there was one.
func (s *Store) Delete(ctx context.Context, tenant, agent string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tenant_quotas WHERE tenant = $1 AND agent = $2`, tenant, agent)
	if err != nil {
		return false, fmt.Errorf("delete quota: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Key names a tenant's running count: over all its agents (Agent "") or of one agent.
type Key struct {
	Tenant string
	Agent  string
}

// running counts running turns under a live lease per tenant and agent (the turns of no agent
// are the default agent's, named by defaultAgent): one pass over the partial index of running
// turns.
func (s *Store) running(ctx context.Context, defaultAgent string) (map[Key]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant, coalesce(agent, $1), count(*) FROM turns
WHERE status = 'running' AND lease_expires_at >= now() GROUP BY 1, 2`, defaultAgent)
	if err != nil {
		return nil, fmt.Errorf("count running turns: %w", err)
	}
	defer rows.Close()
	out := map[Key]int{}
	for rows.Next() {
		var k Key
		var n int
		if err := rows.Scan(&k.Tenant, &k.Agent, &n); err != nil {
			return nil, fmt.Errorf("count running turns: %w", err)
		}
		out[k] += n
		out[Key{Tenant: k.Tenant}] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running turns: %w", err)
	}
	return out, nil
}

// Spent returns the tokens the tenant's turns spent since since's UTC day.
func (s *Store) Spent(ctx context.Context, tenant string, since time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(total_tokens), 0)::bigint FROM token_usage WHERE tenant = $1 AND day >= $2::date`,
		tenant, since.UTC().Format(time.DateOnly)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read token usage: %w", err)
	}
	return n, nil
}

// Usage is one row of token_usage.
type Usage struct {
	Tenant       string `json:"tenant"`
	Agent        string `json:"agent"`
	Day          string `json:"day"`
	Model        string `json:"model"`
	Turns        int64  `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	TotalTokens  int64  `json:"total_tokens"`
	// Cost is the row's cost at its model's price (TURNSTILE_MODEL_PRICES), nil for a model
	// without one.
	Cost *float64 `json:"cost,omitempty"`
}

// UsageFilter selects usage rows; empty fields select all. From and To are UTC days, inclusive.
type UsageFilter struct {
	Tenant, Agent string
	From, To      time.Time
}

// UsageRows returns the usage rows f selects, by tenant, day, agent and model.
func (s *Store) UsageRows(ctx context.Context, f UsageFilter) ([]Usage, error) {
	var from, to *string
	if !f.From.IsZero() {
		v := f.From.UTC().Format(time.DateOnly)
		from = &v
	}
	if !f.To.IsZero() {
		v := f.To.UTC().Format(time.DateOnly)
		to = &v
	}
	rows, err := s.pool.Query(ctx, `SELECT tenant, agent, to_char(day, 'YYYY-MM-DD'), model, turns, input_tokens, output_tokens, total_tokens
FROM token_usage WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR agent = $2)
  AND ($3::date IS NULL OR day >= $3::date) AND ($4::date IS NULL OR day <= $4::date)
ORDER BY tenant, day, agent, model LIMIT 10000`, f.Tenant, f.Agent, from, to)
	if err != nil {
		return nil, fmt.Errorf("read token usage: %w", err)
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		if err := rows.Scan(&u.Tenant, &u.Agent, &u.Day, &u.Model, &u.Turns, &u.InputTokens, &u.OutputTokens, &u.TotalTokens); err != nil {
			return nil, fmt.Errorf("read token usage: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read token usage: %w", err)
	}
	return out, nil
}
