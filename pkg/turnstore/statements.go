package turnstore

import (
	_ "embed"
	"strings"
)

// include returns stmt with its line "-- include: <name>" replaced by the lines of fragment (none
// when fragment is empty): statements that share a fragment hold it once, and a statement with an
// optional part names it where it goes. A statement without that line is a programming error,
// found when the package is loaded.
func include(stmt, name, fragment string) string {
	marker := "-- include: " + name + "\n"
	if !strings.Contains(stmt, marker) {
		panic("turnstore: statement has no line " + strings.TrimSpace(marker))
	}
	if fragment != "" {
		fragment = strings.TrimSuffix(fragment, "\n") + "\n"
	}
	return strings.Replace(stmt, marker, fragment, 1)
}

// The statements that change many turns lock them through lockedTurnsSQL: a lateral probe by
// primary key per request, the requests taken in turn_id order. The probes run in that order, so
// their row locks are taken in turn_id order whatever the rest of the plan (an UPDATE … FROM
// otherwise takes its locks in the order its join emits rows: the order of the requests, or of
// whichever index it scans). The renewal and a completion batch of one worker share rows; taken in
// different orders they deadlock, and Postgres breaks a deadlock only after deadlock_timeout (1s by
// default), stalling every turn of both statements meanwhile.
//
// A lateral probe is also a plan that does not depend on statistics. Joined to the requests as a
// plain table, turns is planned from stale statistics as a scan of the whole table, or of the
// partial index of running turns (every turn in flight and every dead entry, for every request),
// under a nested loop that reads the requests' arrays again for every row: a batch's cost would grow
// with the table, with the turns in flight and with the square of the batch
// (TestStatementsProbeByKey).
// The status condition is checked above the probe, and OFFSET 0 keeps Postgres from pushing it down
// into the probe, where it would make the partial index of running turns a candidate again.
//
// lockedTurnsSQL is the body of a CTE: req must have columns turn_id and token; it yields req's
// columns (r.*) and the locked row's (l.*) for the requests whose token is still the running turn's.
//
//go:embed locked_turns.sql
var lockedTurnsSQL string
