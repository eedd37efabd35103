// Package deadletter is the worker's dead-letter producer: a Kafka producer of its own that the
// executor hands poison records to (execute.DeadLetterer), so dead-lettering depends on nothing
// but Kafka, not on the consumer whose turns it ends.
//
// It follows pkg/lifecycle: Start builds the client (which contacts the brokers only for the first
// dead letter) and Stop closes it. The worker starts it before the consumer and stops it after the
// consumer's Stop has returned, so every turn the consumer runs can dead-letter — unless the stop's
// deadline ended the consumer's drain early: a dead letter that then fails stays marked on its
// turn's row (dead_letter_reason), as one Kafka refuses does. Its records are produced as
// every turnstile producer's are (kafka.ProducerOpts): acknowledged by every in-sync replica, by an
// idempotent producer.
package deadletter
