// Package turnstore reads and writes the parts of a turn's Postgres row that more than one service
// touches: the status read model the API serves, and cancel requests. The claim, lease and completion
// statements belong to the worker alone and live there.
package turnstore
