package registry

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/registry"
)

//go:embed store.sql
var storeSQL string

// statements are store.sql's sections by name.
var statements = func() map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(storeSQL, "-- name: ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		out[strings.TrimSpace(name)] = strings.TrimSpace(body)
	}
	return out
}()

func stmt(name string) string {
	s, ok := statements[name]
	if !ok {
		panic("registry: no statement " + name)
	}
	return s
}

// Sentinels the handler branches on.
var (
	// ErrStale is a renewal or removal naming a registration that is gone or holds another epoch.
	ErrStale = errors.New("stale registration")
	// ErrTaken is a registration of an instance ID a live registration of another endpoint holds.
	ErrTaken = errors.New("instance id taken")
)

// Store is the registry's write path and reads in Postgres. Safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a store over pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Register writes reg under agent with a lease of lease, returning its epoch and expiry.
func (s *Store) Register(ctx context.Context, agent string, reg registry.Registration, lease time.Duration) (int64, time.Time, error) {
	var epoch int64
	var exp time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, stmt("register"), agent, reg.InstanceID, reg.Endpoint, reg.Zone, reg.CardDigest,
			lease.Milliseconds()).Scan(&epoch, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrTaken
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrTaken) {
		err = fmt.Errorf("register: %w", err)
	}
	return epoch, exp, err
}

// Renew extends the lease of agent's instance id held with epoch; a frozen registration becomes
// live again. ErrStale when no registration of that epoch exists.
func (s *Store) Renew(ctx context.Context, agent, id string, epoch int64, lease time.Duration) (time.Time, error) {
	var exp time.Time
	err := s.pool.QueryRow(ctx, stmt("renew"), agent, id, epoch, lease.Milliseconds()).Scan(&exp)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.pool.QueryRow(ctx, stmt("renew_frozen"), agent, id, epoch, lease.Milliseconds()).Scan(&exp)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// A sweep that released the guard may have thawed the registration (frozen to live, with
		// a lease) between the two statements: the live renewal matches now. Without this the
		// renewal would be refused as stale and the replica would register again.
		err = s.pool.QueryRow(ctx, stmt("renew"), agent, id, epoch, lease.Milliseconds()).Scan(&exp)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, ErrStale
	case err != nil:
		return time.Time{}, fmt.Errorf("renew: %w", err)
	}
	return exp, nil
}

// Deregister removes agent's instance id held with epoch. ErrStale when there is none.
func (s *Store) Deregister(ctx context.Context, agent, id string, epoch int64) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var got string
		err := tx.QueryRow(ctx, stmt("deregister"), agent, id, epoch).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrStale
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrStale) {
		err = fmt.Errorf("deregister: %w", err)
	}
	return err
}

// List returns agent's registrations (not the removed ones) and the revision they reflect.
func (s *Store) List(ctx context.Context, agent string) (registry.InstanceList, error) {
	out := registry.InstanceList{Agent: agent, Instances: []registry.Instance{}, Counts: map[string]int{
		registry.StateLive: 0, registry.StateExpired: 0, registry.StateFrozen: 0,
	}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var compacted int64
		if err := tx.QueryRow(ctx, stmt("head")).Scan(&out.Revision, &compacted); err != nil {
			return err
		}
		var err error
		out.Instances, err = scanInstances(ctx, tx, stmt("list"), agent)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("list instances: %w", err)
	}
	for _, in := range out.Instances {
		out.Counts[in.State]++
	}
	return out, nil
}

// Changes returns agent's registrations changed after since, or all of them (Reset) when since
// is 0, behind the purged tombstones, or ahead of the registry (a store restored from a backup).
func (s *Store) Changes(ctx context.Context, agent string, since int64) (registry.Changes, error) {
	out := registry.Changes{Agent: agent, Instances: []registry.Instance{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var compacted int64
		if err := tx.QueryRow(ctx, stmt("head")).Scan(&out.Revision, &compacted); err != nil {
			return err
		}
		var err error
		if since <= 0 || since < compacted || since > out.Revision {
			out.Reset = true
			out.Instances, err = scanInstances(ctx, tx, stmt("list"), agent)
			return err
		}
		out.Instances, err = scanInstances(ctx, tx, stmt("changes"), agent, since)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("instance changes: %w", err)
	}
	return out, nil
}

func scanInstances(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]registry.Instance, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out := []registry.Instance{}
	for rows.Next() {
		var in registry.Instance
		var expired bool
		if err := rows.Scan(&in.InstanceID, &in.Endpoint, &in.Zone, &in.CardDigest, &in.Epoch, &in.State,
			&in.ExpiresAt, &in.RenewedAt, &in.RegisteredAt, &in.Revision, &expired); err != nil {
			rows.Close()
			return nil, err
		}
		if in.State == registry.StateLive && expired {
			in.State = registry.StateExpired
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// AgentCount is one agent's registrations as a sweep found them.
type AgentCount struct {
	Agent                  string
	Total, Expired, Frozen int
	// Held says the guard kept the expired registrations (frozen) instead of removing them.
	Held bool
	// Removed are the registrations this sweep removed.
	Removed []string
	// Thawed are the frozen registrations this sweep gave one more lease because the guard
	// released the agent.
	Thawed []string
}

// Sweep removes expired registrations, except those of agents where more than share of the
// registrations expired at once (and more than one): those are frozen. It returns false when
// another replica's sweep holds the lock. tombstoneTTL is how long removals stay readable as
// changes.
//
// recent, when set, is how many registrations of an agent were removed for expiry lately (the
// guard's window): they count as expired and as registrations, so a storm whose leases run out
// over several sweeps is caught as one.
//
// grace is how long a registration stays expired before it is removed: the guard counts it from
// its expiry, so expiries spread over several sweeps are seen together.
//
// lease is what a frozen registration gets back when the guard releases its agent: it is live
// again for one lease, so the renewals of a healing zone that arrive after the share fell back
// within the guard still find their registrations, and one that does not renew is removed later.
func (s *Store) Sweep(ctx context.Context, share float64, grace, lease, tombstoneTTL time.Duration, recent func(agent string) int) ([]AgentCount, bool, error) {
	var out []AgentCount
	locked := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, locked = nil, false
		if err := tx.QueryRow(ctx, stmt("sweep_lock")).Scan(&locked); err != nil || !locked {
			return err
		}
		rows, err := tx.Query(ctx, stmt("sweep_counts"))
		if err != nil {
			return err
		}
		for rows.Next() {
			var c AgentCount
			if err := rows.Scan(&c.Agent, &c.Total, &c.Expired, &c.Frozen); err != nil {
				rows.Close()
				return err
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var remove, freeze, thaw []string
		for i := range out {
			c := &out[i]
			switch {
			case c.Expired == 0:
			case recent != nil && Storm(c.Expired+recent(c.Agent), c.Total+recent(c.Agent), share):
				c.Held = true
				freeze = append(freeze, c.Agent)
			case Storm(c.Expired, c.Total, share):
				c.Held = true
				freeze = append(freeze, c.Agent)
			default:
				remove = append(remove, c.Agent)
				if c.Frozen > 0 {
					thaw = append(thaw, c.Agent)
				}
			}
		}
		if len(freeze) > 0 {
			if _, err := tx.Exec(ctx, stmt("sweep_freeze"), freeze); err != nil {
				return err
			}
		}
		if len(thaw) > 0 {
			// Before the removals: a thawed registration is no longer expired.
			thawed, err := agentIDs(ctx, tx, stmt("sweep_thaw"), thaw, lease.Milliseconds())
			if err != nil {
				return err
			}
			for i := range out {
				out[i].Thawed = thawed[out[i].Agent]
			}
		}
		if len(remove) > 0 {
			removed, err := agentIDs(ctx, tx, stmt("sweep_delete"), remove, grace.Milliseconds())
			if err != nil {
				return err
			}
			for i := range out {
				out[i].Removed = removed[out[i].Agent]
			}
		}
		var compacted int64
		err = tx.QueryRow(ctx, stmt("purge"), tombstoneTTL.Milliseconds()).Scan(&compacted)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("sweep registrations: %w", err)
	}
	return out, locked, nil
}

// agentIDs runs a statement returning (agent, instance_id) rows and groups the IDs by agent.
func agentIDs(ctx context.Context, tx pgx.Tx, sql string, args ...any) (map[string][]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var agent, id string
		if err := rows.Scan(&agent, &id); err != nil {
			return nil, err
		}
		out[agent] = append(out[agent], id)
	}
	return out, rows.Err()
}

// Storm is the mass-expiry guard's test: expired of total registrations is a storm (the registry
// suspects itself, not the replicas) when it is more than share of them and more than one. A
// single expiry is never a storm, or an agent of fewer than 1/share replicas could never lose one.
func Storm(expired, total int, share float64) bool {
	return expired > 1 && float64(expired) > share*float64(total)
}
