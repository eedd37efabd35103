// Package kafka holds turnstile's Kafka plumbing on franz-go: the producer options that make
// "accepted means durable" true (acks=all, idempotent writes), the consumer-group options workers
// share, topic creation, W3C trace-context propagation in record headers, and the embedded broker —
// franz-go's kfake, a real Kafka-protocol server in process — that `make dev` and the tests run.
package kafka
