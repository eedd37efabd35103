package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrLimit is a new item of a tenant that has its most items.
var ErrLimit = errors.New("the tenant has its most store items")

// Item is one stored item.
type Item struct {
	Namespace []string
	Key       string
	Value     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store reads and writes a tenant's items over a pool.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// live is the condition of an item that has not expired.
const live = `(expires_at IS NULL OR expires_at > now())`

// Put stores value under (namespace, key), replacing the item there. ttl, when set, is the
// item's life in minutes from now (and from each read that refreshes it). A new item of a tenant
// with most items is ErrLimit: the count and the insert are one transaction under a lock named by
// the tenant. The tenant's expired items are deleted first.
func (s *Store) Put(ctx context.Context, tenant string, namespace []string, key string, value json.RawMessage, ttl *float64, most int) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('langgraph_store:' || $1, 0))`, tenant); err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM langgraph_store WHERE tenant = $1 AND expires_at <= now()`, tenant); err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	var n int
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(namespace = $2 AND key = $3), false) FROM langgraph_store WHERE tenant = $1`,
		tenant, namespace, key).Scan(&n, &exists); err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	if !exists && n >= most {
		return ErrLimit
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO langgraph_store (tenant, namespace, key, value, ttl_minutes, expires_at)
		VALUES ($1, $2, $3, $4, $5::float8, now() + make_interval(secs => $5::float8 * 60))
		ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value, ttl_minutes = excluded.ttl_minutes,
			expires_at = excluded.expires_at, updated_at = now()`,
		tenant, namespace, key, value, ttl); err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	return nil
}

// refresh restarts the life of the items read, when asked.
const refreshSet = `expires_at = CASE WHEN $%d AND ttl_minutes IS NOT NULL THEN now() + make_interval(secs => ttl_minutes * 60) ELSE expires_at END`

// Get reads the item at (namespace, key); ok is false when there is none (or it expired).
// refresh restarts an item's ttl.
func (s *Store) Get(ctx context.Context, tenant string, namespace []string, key string, refresh bool) (Item, bool, error) {
	it := Item{Namespace: namespace, Key: key}
	err := s.pool.QueryRow(ctx, `UPDATE langgraph_store SET `+fmt.Sprintf(refreshSet, 4)+`
		WHERE tenant = $1 AND namespace = $2 AND key = $3 AND `+live+`
		RETURNING value, created_at, updated_at`, tenant, namespace, key, refresh).Scan(&it.Value, &it.CreatedAt, &it.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, false, nil
	}
	if err != nil {
		return Item{}, false, fmt.Errorf("get item: %w", err)
	}
	return it, true, nil
}

// Delete deletes the item at (namespace, key), if any.
func (s *Store) Delete(ctx context.Context, tenant string, namespace []string, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM langgraph_store WHERE tenant = $1 AND namespace = $2 AND key = $3`, tenant, namespace, key); err != nil {
		return fmt.Errorf("delete item: %w", err)
	}
	return nil
}

// Search reads a page of the items under prefix whose value contains filter (a JSON object:
// each member equal, jsonb @>), by namespace and key. refresh restarts the ttl of the items read.
func (s *Store) Search(ctx context.Context, tenant string, prefix []string, filter json.RawMessage, limit, offset int, refresh bool) ([]Item, error) {
	var f any
	if len(filter) > 0 && string(filter) != "null" {
		f = string(filter)
	}
	rows, err := s.pool.Query(ctx, `
		WITH page AS (
			SELECT namespace, key FROM langgraph_store
			WHERE tenant = $1 AND namespace[1:cardinality($2::text[])] = $2::text[] AND `+live+`
				AND ($3::jsonb IS NULL OR value @> $3::jsonb)
			ORDER BY namespace, key LIMIT $4 OFFSET $5)
		UPDATE langgraph_store s SET `+fmt.Sprintf(refreshSet, 6)+`
		FROM page WHERE s.tenant = $1 AND s.namespace = page.namespace AND s.key = page.key
		RETURNING s.namespace, s.key, s.value, s.created_at, s.updated_at`,
		tenant, prefix, f, limit, offset, refresh)
	if err != nil {
		return nil, fmt.Errorf("search items: %w", err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.Namespace, &it.Key, &it.Value, &it.CreatedAt, &it.UpdatedAt); err != nil {
			return nil, fmt.Errorf("search items: %w", err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search items: %w", err)
	}
	// UPDATE … RETURNING keeps no order.
	slices.SortFunc(out, func(a, b Item) int {
		if c := slices.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out, nil
}

// Wildcard matches any one label in a prefix or suffix of ListNamespaces.
const Wildcard = "*"

// ListNamespaces reads a page of the tenant's distinct namespaces that start with prefix and end
// with suffix (either may hold Wildcard labels), each cut to maxDepth labels when maxDepth > 0,
// sorted.
func (s *Store) ListNamespaces(ctx context.Context, tenant string, prefix, suffix []string, maxDepth, limit, offset int) ([][]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT namespace FROM langgraph_store WHERE tenant = $1 AND `+live+` ORDER BY namespace`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	var all [][]string
	for rows.Next() {
		var ns []string
		if err := rows.Scan(&ns); err != nil {
			return nil, fmt.Errorf("list namespaces: %w", err)
		}
		if !matches(ns, prefix) || !matches(reversed(ns), reversed(suffix)) {
			continue
		}
		if maxDepth > 0 && len(ns) > maxDepth {
			ns = ns[:maxDepth]
		}
		k, _ := json.Marshal(ns)
		if !seen[string(k)] {
			seen[string(k)] = true
			all = append(all, ns)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	slices.SortFunc(all, slices.Compare)
	if offset >= len(all) {
		return [][]string{}, nil
	}
	return all[offset:min(len(all), offset+limit)], nil
}

// matches reports whether ns starts with pattern, label by label (Wildcard matches any).
func matches(ns, pattern []string) bool {
	if len(pattern) > len(ns) {
		return false
	}
	for i, p := range pattern {
		if p != Wildcard && p != ns[i] {
			return false
		}
	}
	return true
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
