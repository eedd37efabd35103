package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is the embedded Kafka-protocol broker: franz-go's kfake listening on a loopback port, so
// other processes on the machine (a worker started on its own, the load generator) can reach it. It
// keeps records in memory only: it is for development and tests, never production.
type Broker struct {
	addr       string
	numBrokers int
	partitions int32
	topics     []string
	log        *slog.Logger

	mu      sync.Mutex
	cluster *kfake.Cluster
}

// NewBroker prepares a broker on addr ("127.0.0.1:9092"; port 0 picks a free one) with the given
// topics pre-created.
func NewBroker(log *slog.Logger, addr string, numBrokers int, partitions int32, topics ...string) *Broker {
	if numBrokers < 1 {
		numBrokers = 1
	}
	return &Broker{addr: addr, numBrokers: numBrokers, partitions: partitions, topics: topics, log: log}
}

// Start listens. It returns once the broker accepts connections.
func (b *Broker) Start(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cluster != nil {
		return nil
	}
	host, portStr, err := net.SplitHostPort(b.addr)
	if err != nil {
		return fmt.Errorf("embedded broker address %q: %w", b.addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("embedded broker port %q: %w", portStr, err)
	}
	ports := make([]int, b.numBrokers)
	for i := range ports {
		if port != 0 {
			ports[i] = port + i
		}
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(b.numBrokers),
		kfake.Ports(ports...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(b.partitions)),
	}
	if host != "" {
		h := host
		opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(address)
			return net.Listen(network, net.JoinHostPort(h, p))
		}))
	}
	if len(b.topics) > 0 {
		opts = append(opts, kfake.SeedTopics(b.partitions, b.topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start embedded broker on %s: %w", b.addr, err)
	}
	b.cluster = c
	b.log.Info("embedded kafka broker listening", "addrs", c.ListenAddrs(), "partitions", b.partitions, "topics", b.topics)
	return nil
}

// Addrs lists the listening addresses, for clients' seed brokers.
func (b *Broker) Addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cluster == nil {
		return nil
	}
	return b.cluster.ListenAddrs()
}

// Cluster exposes the kfake cluster for fault injection in tests.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster
}

// Stop closes the broker. Safe to call twice or before Start.
func (b *Broker) Stop(context.Context) error {
	b.mu.Lock()
	c := b.cluster
	b.cluster = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
		if b.log != nil {
			b.log.Info("embedded broker stopped; its records were in memory only and are gone: " +
				"intake re-drives the accepted turns not yet finished from Postgres at the next start")
		}
	}
	return nil
}
