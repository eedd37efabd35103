// Package offsets tracks, for one partition, which fetched records are finished, so the worker can
// commit the partition's offset at its lowest unfinished record — never past a turn that is still
// queued behind its session or running. Records finish in any order (sessions run concurrently);
// the commit point only moves when the oldest outstanding record finishes.
package offsets
