// Package health keeps the router's view of which regions are up. It probes each region's
// readiness endpoint (GET <url>/readyz) on an interval and also hears of failed forwards, so a
// region that stops answering is marked down by the first forward that cannot reach it rather than
// after a probe round; the router then answers that region's requests from this state at once,
// without dialling.
//
// Hysteresis: a region goes down after Fall consecutive failed probes or one failed forward, and
// comes back only after Rise consecutive good probes, so a region that flaps between answering and
// not is not sent traffic on every good probe. Every region starts up: a router that has just
// started forwards at once and learns otherwise from its first failure.
//
// The Monitor is one lifecycle component (Start, Stop); each round probes every region at once
// and waits for all of them, each probe bounded by Timeout, so a round never outlives its interval
// by more than Timeout and Stop never waits for a hung region.
package health
