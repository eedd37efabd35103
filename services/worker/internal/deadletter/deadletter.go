package deadletter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/kafka"
)

// ErrNotRunning is what DeadLetter returns before Start and after Stop.
var ErrNotRunning = errors.New("dead-letter producer is not running")

// Producer writes dead letters. Safe for concurrent use.
type Producer struct {
	opts []kgo.Opt

	mu sync.Mutex
	// client is the running client, nil outside a run.
	client *kgo.Client
}

// New returns a producer for the brokers; extra options are appended to the client's (tests tune
// timeouts). It connects to nothing until Start and the first dead letter.
func New(brokers []string, extra ...kgo.Opt) *Producer {
	return &Producer{opts: append(kafka.ProducerOpts(brokers), extra...)}
}

// Start builds the client. While running, Start does nothing.
func (p *Producer) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return nil
	}
	cl, err := kafka.NewClient(p.opts...)
	if err != nil {
		return fmt.Errorf("start dead-letter producer: %w", err)
	}
	p.client = cl
	return nil
}

// Stop closes the client; a dead letter still in flight fails. Safe twice and before Start.
func (p *Producer) Stop(context.Context) error {
	p.mu.Lock()
	cl := p.client
	p.client = nil
	p.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return nil
}

// DeadLetter writes rec (whose Topic names the dead-letter topic) and returns once every in-sync
// replica has it, or why not: ErrNotRunning outside a run.
func (p *Producer) DeadLetter(ctx context.Context, rec *kgo.Record) error {
	p.mu.Lock()
	cl := p.client
	p.mu.Unlock()
	if cl == nil {
		return ErrNotRunning
	}
	err := cl.ProduceSync(ctx, rec).FirstErr()
	if kafka.NewIncarnation(err) {
		// The dead-letter topic was recreated (or the embedded broker restarted): the client
		// refuses it until it is purged, and then produces to the incarnation of now.
		cl.PurgeTopicsFromProducing(rec.Topic)
		again := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Context: rec.Context}
		err = cl.ProduceSync(ctx, again).FirstErr()
	}
	if err != nil {
		return fmt.Errorf("produce dead letter: %w", err)
	}
	return nil
}
