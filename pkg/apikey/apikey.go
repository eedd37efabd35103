package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/region"
)

// Errors callers branch on.
var (
	// ErrUnknown is returned for a key that does not exist or was revoked.
	ErrUnknown = errors.New("unknown or revoked api key")
	// ErrInvalidTenant is returned for a tenant name outside [A-Za-z0-9._-]{1,64}.
	ErrInvalidTenant = errors.New("tenant must be 1-64 characters of [A-Za-z0-9._-]")
	// ErrMalformed is an imported key that does not have the shape of a key Create makes.
	ErrMalformed = errors.New("not a turnstile API key (ts_<key id>_<secret>)")
	// ErrConflict is an imported key whose ID this region already holds for another key or
	// tenant.
	ErrConflict = errors.New("this region holds the key ID for another key or tenant")
)

var tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// TenantValid reports whether name is a valid tenant name.
func TenantValid(name string) bool { return tenantRE.MatchString(name) }

// Key is one stored key (never its secret).
type Key struct {
	ID     string
	Tenant string
	// Admin is an admin key's: it sees and acts on every tenant's turns in the admin API
	// (/v1/admin/…), where a tenant's key sees only its own.
	Admin     bool
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Roles of a key, as stored.
const (
	RoleTenant = "tenant"
	RoleAdmin  = "admin"
)

// keyRE is the shape of every key Create makes: "ts_", the key ID (12 hex digits, prefixed
// "<region>-" when a region minted it), "_", 32 random bytes in unpadded base64url.
var keyRE = regexp.MustCompile(`^ts_(?:` + region.CodePattern + `-)?[0-9a-f]{12}_[A-Za-z0-9_-]{43}$`)

// WellFormed reports whether key has the shape of a key Create makes; one that does not cannot
// exist, so it needs no lookup.
func WellFormed(key string) bool { return keyRE.MatchString(key) }

// Hash is what is stored for a key.
func Hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Create makes a key for tenant in single-region mode (CreateIn without a region).
func Create(ctx context.Context, pool *pgxpool.Pool, tenant string) (id, key string, err error) {
	return CreateIn(ctx, pool, "", tenant)
}

// CreateIn makes a key for tenant and returns it in full; it cannot be read back later. Its ID
// starts with code, the region minting it (pkg/region; none when code is empty), so a router
// reading the key ID can name the tenant's home region without a lookup.
func CreateIn(ctx context.Context, pool *pgxpool.Pool, code, tenant string) (id, key string, err error) {
	return create(ctx, pool, code, tenant, RoleTenant)
}

// CreateAdmin makes an admin key (Key.Admin) of tenant in region code: its requests act as tenant
// everywhere but in the admin API, where it sees every tenant.
func CreateAdmin(ctx context.Context, pool *pgxpool.Pool, code, tenant string) (id, key string, err error) {
	return create(ctx, pool, code, tenant, RoleAdmin)
}

func create(ctx context.Context, pool *pgxpool.Pool, code, tenant, role string) (id, key string, err error) {
	if !TenantValid(tenant) {
		return "", "", ErrInvalidTenant
	}
	idb := make([]byte, 6)
	secret := make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return "", "", fmt.Errorf("generate key id: %w", err)
	}
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("generate key secret: %w", err)
	}
	id = region.Prefix(code, hex.EncodeToString(idb))
	key = "ts_" + id + "_" + base64.RawURLEncoding.EncodeToString(secret)
	if _, err := pool.Exec(ctx, `INSERT INTO api_keys (key_id, tenant, key_hash, role) VALUES ($1, $2, $3, $4)`,
		id, tenant, Hash(key), role); err != nil {
		return "", "", fmt.Errorf("store api key: %w", err)
	}
	return id, key, nil
}

// Import stores an existing key, minted by another region, for tenant: the same ID and the same
// hash, so the key works here too (a failover tenant's key must work in every region it may be
// placed in). Importing a key this region already holds for the same tenant changes nothing.
func Import(ctx context.Context, pool *pgxpool.Pool, tenant, key string) (id string, err error) {
	if !TenantValid(tenant) {
		return "", ErrInvalidTenant
	}
	id, ok := region.KeyID(key)
	if !ok || !WellFormed(key) {
		return "", ErrMalformed
	}
	tag, err := pool.Exec(ctx, `INSERT INTO api_keys (key_id, tenant, key_hash) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, id, tenant, Hash(key))
	if err != nil {
		return "", fmt.Errorf("import api key: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return id, nil
	}
	var same bool
	err = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE key_id = $1 AND tenant = $2 AND key_hash = $3)`,
		id, tenant, Hash(key)).Scan(&same)
	if err != nil {
		return "", fmt.Errorf("import api key: %w", err)
	}
	if !same {
		return "", ErrConflict
	}
	return id, nil
}

// Revoke revokes a key by ID. Revoking a revoked key is not an error; an unknown ID is ErrUnknown.
func Revoke(ctx context.Context, pool *pgxpool.Pool, id string) error {
	tag, err := pool.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE key_id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrUnknown
	}
	return nil
}

// Lookup returns the tenant of a live key.
func Lookup(ctx context.Context, pool *pgxpool.Pool, key string) (string, error) {
	k, err := Resolve(ctx, pool, key)
	return k.Tenant, err
}

// Resolve returns the ID and tenant of a live key.
func Resolve(ctx context.Context, pool *pgxpool.Pool, key string) (Key, error) {
	var k Key
	err := pool.QueryRow(ctx, `SELECT key_id, tenant, role = 'admin', created_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
		Hash(key)).Scan(&k.ID, &k.Tenant, &k.Admin, &k.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrUnknown
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up api key: %w", err)
	}
	return k, nil
}

// RevokedWithin returns the IDs of the keys revoked in the last window. The gateway reads it
// periodically with window = the stream-token TTL: a token issued to a key revoked earlier than
// that has expired anyway.
func RevokedWithin(ctx context.Context, pool *pgxpool.Pool, window time.Duration) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT key_id FROM api_keys
		WHERE revoked_at > now() - make_interval(secs => $1::float8 / 1000)`, window.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("list revoked api keys: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list revoked api keys: %w", err)
	}
	return ids, nil
}

// List returns the keys, of one tenant when tenant is not empty.
func List(ctx context.Context, pool *pgxpool.Pool, tenant string) ([]Key, error) {
	rows, err := pool.Query(ctx, `SELECT key_id, tenant, role = 'admin', created_at, revoked_at FROM api_keys
		WHERE $1 = '' OR tenant = $1 ORDER BY created_at`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		var k Key
		err := r.Scan(&k.ID, &k.Tenant, &k.Admin, &k.CreatedAt, &k.RevokedAt)
		return k, err
	})
}

// Command runs `apikey create|import|list|revoke` in region code (empty in single-region mode)
// and writes its result to out.
func Command(ctx context.Context, pool *pgxpool.Pool, code string, args []string, out io.Writer) error {
	const usage = "usage: apikey create --tenant NAME [--admin] | apikey import --tenant NAME --key KEY | " +
		"apikey list [--tenant NAME] | apikey revoke KEY_ID"
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("apikey "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := fs.String("tenant", "", "tenant name")
	imported := fs.String("key", "", "the key to import, in full")
	admin := fs.Bool("admin", false, "an admin key: it sees every tenant in the admin API")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w\n%s", err, usage)
	}
	switch args[0] {
	case "create":
		create, role := CreateIn, ""
		if *admin {
			create, role = CreateAdmin, " role="+RoleAdmin
		}
		id, key, err := create(ctx, pool, code, *tenant)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "key_id=%s tenant=%s%s\n%s\n", id, *tenant, role, key)
		return err
	case "import":
		id, err := Import(ctx, pool, *tenant, *imported)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "imported key_id=%s tenant=%s\n", id, *tenant)
		return err
	case "list":
		keys, err := List(ctx, pool, *tenant)
		if err != nil {
			return err
		}
		for _, k := range keys {
			state := "active"
			if k.RevokedAt != nil {
				state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
			}
			if k.Admin {
				state += "\t" + RoleAdmin
			}
			if _, err := fmt.Fprintf(out, "%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.CreatedAt.UTC().Format(time.RFC3339), state); err != nil {
				return err
			}
		}
		return nil
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New(usage)
		}
		if err := Revoke(ctx, pool, fs.Arg(0)); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "revoked %s\n", fs.Arg(0))
		return err
	default:
		return errors.New(usage)
	}
}
