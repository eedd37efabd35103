// Package logging sets up slog for every turnstile process: readable text for development, JSON for
// production, and the turn, session and trace IDs carried in a context so every log line about a
// turn can be found by any of them.
package logging
