// Package announce publishes the terminal events of turns intake ends without an attempt: a
// queued turn cancelled at its cancel request (or by an interrupting turn), and a queued turn the
// re-driver (package redrive) found past its deadline or could not re-drive. Each event is
// published with the fresh fencing token of the statement that ended the turn, through the
// worker's fenced publish script, so a worker that later reads the turn's record and finds it
// finished publishes the same terminal event again at most as a no-op (a turn keeps one terminal
// event). Redis is not on intake's accept path: when it does not answer, the failure is logged and
// the worker's claim of the record, if the record is still there, publishes the event instead.
package announce
