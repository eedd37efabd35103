package latency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/kafka"
)

// Floor is the probe of the least a turn's first event could take: a record produced as intake
// produces one (ProduceSync with turnstile's producer options), fetched by a consumer with the
// worker's fetch wait, written with XADD and read by a reader blocked in XREAD.
type Floor struct {
	Brokers []string
	// Topic is the probe's own topic (created with one partition), so no worker sees its records.
	Topic string
	Redis redis.UniversalClient
	// Key is the probe's own stream.
	Key string
	// Every is the pause between probes. Defaults to 20 ms.
	Every time.Duration
}

// fetchMaxWait is the worker consumer's fetch wait (services/worker's consume package).
const fetchMaxWait = 100 * time.Millisecond

// Prepare creates the probe's topic.
func (f Floor) Prepare(ctx context.Context) error {
	return kafka.EnsureTopics(ctx, f.Brokers, 1, f.Topic)
}

// Run probes until ctx ends and returns each probe's produce → XREAD time, in order. Probes still
// in the pipeline when ctx ends are dropped.
func (f Floor) Run(ctx context.Context) ([]time.Duration, error) {
	every := f.Every
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	prod, err := kafka.NewClient(kafka.ProducerOpts(f.Brokers)...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	cons, err := kafka.NewClient(kgo.SeedBrokers(f.Brokers...), kgo.ConsumeTopics(f.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(fetchMaxWait))
	if err != nil {
		return nil, err
	}
	defer cons.Close()

	var wg sync.WaitGroup
	var fetchErr, readErr error
	wg.Add(2)
	go func() { // fetch → XADD
		defer wg.Done()
		fetchErr = f.relay(ctx, cons)
	}()
	var got []time.Duration
	go func() { // XREAD
		defer wg.Done()
		got, readErr = f.read(ctx)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var prodErr error
	for prodErr == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			sent := strconv.FormatInt(time.Now().UnixNano(), 10)
			prodErr = prod.ProduceSync(ctx, &kgo.Record{Topic: f.Topic, Value: []byte(sent)}).FirstErr()
			continue
		}
		break
	}
	wg.Wait()
	if ctx.Err() != nil && errors.Is(prodErr, ctx.Err()) {
		prodErr = nil
	}
	if err := errors.Join(prodErr, fetchErr, readErr); err != nil {
		return got, fmt.Errorf("floor probe: %w", err)
	}
	return got, nil
}

// relay writes every fetched record's value to the probe's stream.
func (f Floor) relay(ctx context.Context, cons *kgo.Client) error {
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			return err
		}
		var err error
		fs.EachRecord(func(r *kgo.Record) {
			if err == nil {
				err = f.Redis.XAdd(ctx, &redis.XAddArgs{Stream: f.Key, Values: []string{"t", string(r.Value)}}).Err()
			}
		})
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
}

// read reads the probe's stream with a blocking XREAD (bounded, since a blocked read does not see
// ctx end) and times each entry from its produce.
func (f Floor) read(ctx context.Context) ([]time.Duration, error) {
	var got []time.Duration
	last := "0-0"
	for ctx.Err() == nil {
		res, err := f.Redis.XRead(ctx, &redis.XReadArgs{Streams: []string{f.Key, last}, Block: 200 * time.Millisecond}).Result()
		now := time.Now()
		if errors.Is(err, redis.Nil) || ctx.Err() != nil {
			continue
		}
		if err != nil {
			return got, err
		}
		for _, m := range res[0].Messages {
			last = m.ID
			v, _ := m.Values["t"].(string)
			sent, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return got, fmt.Errorf("probe entry %s: %w", m.ID, err)
			}
			got = append(got, now.Sub(time.Unix(0, sent)))
		}
	}
	return got, nil
}
