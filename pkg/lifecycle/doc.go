// Package lifecycle is the one start/stop contract of turnstile's background components (the
// consumer, the stream hub, the batchers, the lease renewer, the cancel watcher, retention, the
// vacuumer, the queued-row recorder, the backlog monitor, and the roles made of them): Start returns
// at once with the work running in goroutines the component owns; Stop cancels it and waits until
// it has ended, or until its own context gives up (then it says what did not stop); both are safe
// to call twice and concurrently, and Stop is safe before Start and after a failed Start.
//
// Component names the contract. Runner is the embeddable base of a component whose work is one run
// function, built on Loop, which owns one goroutine; a periodic component's run function is Every
// with its interval and its one round of work. Group composes components that depend on each other:
// it starts them in order, unwinds the started ones when one fails, and stops them in reverse order
// within one deadline; StartFunc is a Group child that only runs a step at start. Wait bounds a
// Stop's wait for work it does not run in a Loop. The roles' shell over a Group is app.Shell.
//
// Streams is the same contract for the long-lived streams a handler serves (the gateway's event
// streams, the front doors' A2A, AI SDK and LangGraph streams): each is tracked while open; Drain
// tells them to end so their clients reconnect elsewhere, Cut so they reconnect here, and Wait
// waits for them, as net/http's Server does for its connections on Shutdown.
package lifecycle
