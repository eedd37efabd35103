// Package lifecycle is the one start/stop contract of turnstile's background components (lease
// renewer, cancel watcher, retention cleaner, backlog monitor, queued-row recorder): Start returns at
// once with the work running in a goroutine the component owns; Stop cancels it and waits until it
// has ended, or until its own context gives up; both are safe to call twice, and Stop is safe
// before Start. A component embeds a Loop and hands it its run function; a periodic one's run
// function is Every with its interval and its one round of work.
package lifecycle
