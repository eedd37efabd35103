// Package report writes a load test's outcome: the JSON report and PNG plots of its timeline
// (arrivals and completions per second, outstanding turns, and the scraped backlog-age gauge), drawn
// with gonum/plot.
package report
