// Package migrations embeds turnstile's SQL migrations so every binary carries the schema it needs.
// They are applied by pkg/postgres.Migrate (at start when TURNSTILE_MIGRATE=auto, or by the
// `migrate` subcommand); never by hand. Files are goose migrations, numbered, each with an Up and a
// Down section, and only ever appended: a released migration is never edited.
package migrations

import "embed"

// FS holds the *.sql files.
//
//go:embed *.sql
var FS embed.FS
