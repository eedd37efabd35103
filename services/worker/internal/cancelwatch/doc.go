// Package cancelwatch delivers cancel requests to running turns within milliseconds.
//
// Migration 00010 makes Postgres NOTIFY the channel "<schema>.turn_cancel" with the turn ID when a
// running turn's cancel flag is set. A Watcher holds one dedicated connection per worker that
// LISTENs on it (turnstore.Store.ListenCancels) and hands each turn ID to a callback (the renewer,
// which cancels the attempt if this worker holds it). The notification is only a shortcut: lease
// renewal reports cancel flags too, so a notification lost while the watcher reconnects costs at
// most one heartbeat interval.
package cancelwatch
