// Package scrape reads one metric from a Prometheus text exposition (/metrics), so the load
// generator can record a gauge over time without a Prometheus server.
//
// Decision: it reports whether the metric was present at all, because the load generator must say
// "absent" rather than plot zeros when a stack does not export it.
package scrape
