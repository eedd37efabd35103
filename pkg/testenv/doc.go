// Package testenv gives each test its own turnstile environment on the real services: a Postgres
// schema created and migrated for the test and dropped after it, a Redis key prefix whose keys are
// deleted after it, and a fresh in-process kfake cluster — or, when TURNSTILE_KAFKA_BROKERS is set,
// topics and a consumer group on that real broker named uniquely for the test.
//
// Proxy puts a cuttable TCP hop between a process and one of those services, so a test can take a
// dependency away from one process (refused, or silently partitioned) without stopping the shared
// service every other test uses.
//
// Tests that need the services fail (not skip) when they are unreachable: CI starts them, and a
// silently skipped integration test proves nothing.
package testenv
