// Package postgres builds turnstile's pgx pool and applies the embedded migrations with goose.
//
// A pool can be confined to one schema (TURNSTILE_DATABASE_SCHEMA): every connection's search_path
// is set to it, so tests get an isolated copy of every table in one shared database, and operators
// can run several stacks side by side. Migrations take a Postgres advisory lock of their schema, so
// several processes starting at once apply them once, and stacks in other schemas do not wait for
// them.
package postgres
