// Package history gives agents a session's history: the messages appended, exactly once per
// succeeded turn, by the completion transaction (session_history: one row a turn, holding its
// question and answer), oldest first.
//
// A Cache keeps the history of recently used sessions in memory, bounded by a number of sessions
// (least recently used first out). Every Get validates its entry with one cheap indexed statement
// that reads sessions.last_seq and, in the same round trip, only the messages newer than the cached
// ones: a warm hit reads no message row at all, and a history another worker appended (after a
// rebalance moved the session's partition) is never missed, because last_seq is bumped in the same
// transaction that appends the messages. Partition affinity keeps the cache warm: every turn of a
// session goes to the worker that owns its partition.
//
// The worker avoids even that statement on its hot path: the claim reads the session's last_seq in
// its own statement (lease.Claim.SessionSeq) and GetAt answers from memory when the cached history is
// at that sequence number, or when the session has no history yet; and the completion reports the
// sequence number of the messages it appended, which Appended adds to the cached history. So a
// session's first turn and every later turn on the same worker read no history from Postgres; a
// history written elsewhere (another worker, after a rebalance) shows up as a newer sequence number
// in the claim and is read through Get.
package history
