package app

import (
	"context"

	"github.com/turnstile-run/turnstile/pkg/kafka"
)

// BrokerRole runs the embedded Kafka broker on TURNSTILE_BROKER_ADDR with the turns and dead-letter
// topics pre-created.
var BrokerRole = Role{
	Name: "broker",
	New: func(_ context.Context, d *Deps) (Component, error) {
		c := d.Config
		return kafka.NewBroker(d.Log.With("role", "broker"), c.BrokerAddr, 1, int32(c.Partitions), c.Topic, c.DLQTopic), nil
	},
}
