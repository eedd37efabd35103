// Package threads stores LangGraph threads: one row per (tenant, thread ID) in the
// langgraph_threads table (migration 00120), holding the thread's metadata and creation time. A
// thread is the session of the same ID in its tenant's namespace; its runs, state and history are
// that session's turns, read through the native API, so this table holds nothing else and is the
// only table the langgraph role owns.
//
// Every statement has the caller's context; a Postgres fault surfaces as an error the API answers
// with 503 and Retry-After (ErrNotFound is the one condition callers branch on).
package threads
