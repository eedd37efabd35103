package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/kafka"
)

// The floor's shape: how many batches are worked on at once, and the most records in one.
const (
	floorWorkers = 4
	floorBatch   = 256
)

// floorSchemaSQL is the floor's table: the narrowest row a fenced lease needs (owner and expiry
// folded into status and token), on its primary key alone, so the completion may be a HOT update.
const floorSchemaSQL = `
CREATE SEQUENCE floor_token_seq AS bigint;
CREATE TABLE floor_turns (
    turn_id          uuid PRIMARY KEY,
    session_id       text NOT NULL,
    status           text NOT NULL,
    token            bigint NOT NULL,
    lease_expires_at timestamptz,
    output           text
)`

// floorClaimSQL takes a lease on each turn not yet seen; floorCompleteSQL ends the turns whose
// token is still theirs.
const (
	floorClaimSQL = `
INSERT INTO floor_turns (turn_id, session_id, status, token, lease_expires_at)
SELECT r.id, r.sid, 'running', nextval('floor_token_seq'), now() + interval '15 seconds'
FROM unnest($1::uuid[], $2::text[]) AS r(id, sid) ORDER BY r.id
ON CONFLICT (turn_id) DO NOTHING
RETURNING turn_id, session_id, token`
	floorCompleteSQL = `
UPDATE floor_turns t SET status = 'succeeded', output = 'ok', lease_expires_at = NULL
FROM unnest($1::uuid[], $2::bigint[]) AS r(id, token)
WHERE t.turn_id = r.id AND t.token = r.token AND t.status = 'running'`
)

// Floor queues o.Jobs turn records in Kafka as Turnstile does, then drains them with the least any
// pipeline of turnstile's shape does per turn, written with the raw clients and none of
// turnstile's code: a consumer group reads the records and decodes each one's turn and session;
// per batch of records one statement claims the turns (a narrow row with a token, on its primary
// key only), one pipeline appends three entries per turn to the turn's session stream (plain
// XADDs: no fencing, epoch, prev chain, trimming, TTL or notification), and one statement
// completes the turns whose token is still theirs. It leaves out the session history, the
// per-session order, lease renewal, the agent interface and tracing. It measures what the engines
// turnstile stands on cost for such a turn on this machine: turnstile's rate over the floor's is the
// price of turnstile's own work, and the floor's over River's the most any design of this shape
// could reach against River here.
func Floor(ctx context.Context, o Options) (Result, error) {
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	topic, schema, prefix := "lt-floor-"+id, "lt_floor_"+id, "lt-floor-"+id
	broker := kafka.NewBroker(o.Log.With("role", "broker"), "127.0.0.1:0", 1, int32(max(o.Base.Partitions, 1)), topic)
	if err := broker.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start embedded broker: %w", err)
	}
	defer func() { _ = broker.Stop(context.WithoutCancel(ctx)) }()
	if err := queueTurns(ctx, broker.Addrs(), topic, o.Jobs, o.Sessions, nil); err != nil {
		return Result{}, err
	}

	cfg := o.Base
	cfg.DatabaseSchema, cfg.KeyPrefix = schema, prefix
	// The schema and the keys go as a stack's do. Deferred first, so it runs after the pool and the
	// client below are closed.
	defer func() { _ = stack.Cleanup(context.WithoutCancel(ctx), cfg) }()
	pool, err := floorPool(ctx, cfg.DatabaseURL, schema)
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	rdb, err := app.NewRedis(cfg)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = rdb.Close() }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addrs()...), kgo.ConsumerGroup(topic), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return Result{}, fmt.Errorf("create kafka consumer: %w", err)
	}
	defer cl.Close()

	f := &floor{pool: pool, rdb: rdb, prefix: prefix}
	began := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	failed := make(chan error, floorWorkers+1)
	batches := make(chan []*kgo.Record, floorWorkers)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(batches)
		for {
			fs := cl.PollRecords(runCtx, floorBatch)
			if runCtx.Err() != nil {
				return
			}
			if err := fs.Err0(); err != nil {
				failed <- fmt.Errorf("poll turn records: %w", err)
				return
			}
			select {
			case batches <- fs.Records():
			case <-runCtx.Done():
				return
			}
		}
	})
	for range floorWorkers {
		wg.Go(func() {
			for recs := range batches {
				if err := f.run(runCtx, recs); err != nil {
					if runCtx.Err() == nil {
						failed <- err
					}
					return
				}
			}
		})
	}
	d, err := drain(ctx, o.Jobs, began, func(context.Context) (int, error) {
		select {
		case err := <-failed:
			return 0, err
		default:
			return int(f.done.Load()), nil
		}
	}, countRows(pool, `SELECT count(*) FROM floor_turns WHERE status = 'succeeded'`))
	stop()
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	return d.result("floor", o.Jobs, fmt.Sprintf("raw franz-go, pgx and go-redis, none of turnstile's code: the same records on a fresh embedded broker (%d partitions) read by a consumer group, "+
		"%d batches of up to %d records at once, each a claim statement (narrow row, primary key only), a pipeline of three plain XADDs per turn and a fenced completion statement; "+
		"no history, per-session order, lease renewal or stream fencing; finished turns counted in process, confirmed once in Postgres",
		max(o.Base.Partitions, 1), floorWorkers, floorBatch)), nil
}

// floorPool opens a pool confined to a fresh schema holding the floor's table.
func floorPool(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 2 * floorWorkers
	pcfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := pool.Exec(ctx, floorSchemaSQL); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create floor table: %w", err)
	}
	return pool, nil
}

// floor runs batches of turn records through the floor's three steps.
type floor struct {
	pool   *pgxpool.Pool
	rdb    redis.UniversalClient
	prefix string
	done   atomic.Int64
}

// run claims, publishes and completes the turns of recs.
func (f *floor) run(ctx context.Context, recs []*kgo.Record) error {
	ids := make([][16]byte, 0, len(recs))
	sessions := make([]string, 0, len(recs))
	for _, r := range recs {
		var e struct {
			TurnID    uuid.UUID `json:"turn_id"`
			SessionID string    `json:"session_id"`
		}
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return fmt.Errorf("decode turn record: %w", err)
		}
		ids, sessions = append(ids, e.TurnID), append(sessions, e.SessionID)
	}
	rows, err := f.pool.Query(ctx, floorClaimSQL, ids, sessions)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	type claimed struct {
		id      [16]byte
		session string
		token   int64
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		err := r.Scan(&c.id, &c.session, &c.token)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(cs) != len(recs) {
		return errors.New("claim: a turn was claimed before (the floor's records are all fresh)")
	}
	_, err = f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range cs {
			turn := uuid.UUID(c.id).String()
			key := f.prefix + ":{" + c.session + "}:events"
			for _, ev := range [...]string{"turn.started", "turn.delta", "turn.completed"} {
				p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", ev, "turn", turn, "data", `{"turn_id":"` + turn + `","attempt":1}`}})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	tokens := make([]int64, len(cs))
	for i, c := range cs {
		ids[i], tokens[i] = c.id, c.token
	}
	tag, err := f.pool.Exec(ctx, floorCompleteSQL, ids[:len(cs)], tokens)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if tag.RowsAffected() != int64(len(cs)) {
		return fmt.Errorf("complete: %d of %d turns were fenced", int64(len(cs))-tag.RowsAffected(), len(cs))
	}
	f.done.Add(int64(len(cs)))
	return nil
}
