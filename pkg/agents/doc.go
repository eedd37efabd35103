// Package agents is the catalog of the agents one turnstile installation runs (README, "Many
// agents"; DESIGN, invariant 16). Each agent has a name ([a-z0-9-]), an adapter with its settings
// (demo, openai, http, a2a; endpoints and pool policy as config.AgentSettings), its limits (turns in
// flight per worker, upstream limits, attempts, default deadline), what its front doors publish (A2A
// card fields, LangGraph assistant metadata and graph) and a version.
//
// The catalog comes from one file, TURNSTILE_AGENTS_FILE, YAML or JSON, checked against the JSON
// Schema in schema.json and then for what a schema cannot say (a duplicate name, a default that names
// no agent); Load returns every error at once, each naming where it is. Without a file the catalog
// holds one agent named "agent" (DefaultName) built from TURNSTILE_AGENT and the TURNSTILE_* agent
// settings, so an installation without a file runs as it always has. Settings an agent of the file
// leaves out take those same variables' values.
//
// A Watcher reads the file again every TURNSTILE_AGENTS_RELOAD_INTERVAL. A good file replaces the
// catalog; Diff says which changes the running roles apply (agents added or removed, what front
// doors publish, versions, the deadline intake sets, and in the workers in_flight, max_attempts,
// upstream_total and the endpoints) and which wait for a restart of the workers that serve the
// agent (the adapter and its other settings, the per-endpoint upstream limits, adding or dropping
// the registry entry). A bad file
// keeps the last good catalog, is logged with every error and counted in
// turnstile_agents_reloads_total{result="invalid"}.
//
// Work is separated by topic: the default agent's turns go to the turns topic (TURNSTILE_KAFKA_TOPIC),
// any other agent's to "<topic>.<name>" (Topic), consumed by its own consumer group
// (ConsumerGroup), so a saturated agent's records never wait in another agent's partitions.
package agents
