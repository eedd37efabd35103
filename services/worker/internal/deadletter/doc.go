// Package deadletter is the worker's dead-letter producer: a Kafka producer of its own that the
// executor hands poison records to (execute.DeadLetterer), so dead-lettering depends on nothing
// but Kafka, not on the consumer whose turns it ends.
//
// It follows pkg/lifecycle: Start builds the client (which contacts the brokers only for the first
// dead letter) and Stop closes it. The worker starts it before the consumer and stops it after the
// consumer's drain, so every turn the consumer runs can dead-letter. Its records are produced as
// every turnstile producer's are (kafka.ProducerOpts): acknowledged by every in-sync replica, by an
// idempotent producer.
package deadletter
