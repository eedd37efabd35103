// Package integration holds turnstile's end-to-end tests: every role composed in one process, or
// split across child processes of the real binary, against real Postgres, real Redis and a real
// Kafka-protocol broker (kfake in process, or TURNSTILE_KAFKA_BROKERS).
package integration
