// Package apikey manages turnstile's API keys: each key maps to one tenant and is stored in Postgres
// only as a SHA-256 hash, so a database dump holds no usable key. Keys are created and revoked with
// the `apikey` subcommand that every turnstile binary carries:
//
//	turnstile apikey create --tenant acme     # prints the key once; keep it
//	turnstile apikey import --tenant acme --key ts_euw1-3f9a0c1d2e4b_…  # a key of another region
//	turnstile apikey list [--tenant acme]
//	turnstile apikey revoke <key id>
//
// With TURNSTILE_REGION set, a created key's ID starts with the region ("euw1-3f9a0c1d2e4b"), so
// the router can tell the tenant's home region from the key alone (pkg/region); keys made before
// keep their bare IDs and keep working. `import` stores a key minted in another region under the
// same ID and hash, so a tenant whose work may fail over can use one key everywhere. Revoking is
// per region: revoke an imported key in every region that holds it.
//
// A key reads "ts_<key id>_<secret>": the key ID is not secret and names the key in logs and in
// `revoke`; the secret is 32 random bytes. Decision: the hash is a plain SHA-256 rather than a slow
// password hash, because the secret has 256 bits of entropy (nothing to brute-force) and intake must
// check keys on its hot path.
package apikey
