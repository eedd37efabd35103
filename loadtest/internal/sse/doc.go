// Package sse is the load generator's own Server-Sent Events reader: it parses a text/event-stream
// body into events (id, event, data), skipping comments and retry hints.
//
// Decision: it shares no code with the gateway, so a framing bug on either side shows up as a
// correctness failure in the load test instead of cancelling out.
package sse
