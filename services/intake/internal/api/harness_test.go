package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/openapi"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
)

// bundle is a handler under test and its collaborators.
type bundle struct {
	env      *testenv.Env
	h        *Handler
	srv      *httptest.Server
	producer *kgo.Client
	recorder *record.Recorder
	registry *prometheus.Registry
	signer   *streamtoken.Signer
	backlog  atomic.Int64 // nanoseconds reported as the backlog age
}

type options struct {
	cfg func(*Config)
	// pool and redis, when set, replace the environment's (e.g. with unreachable ones).
	pool  *pgxpool.Pool
	redis redis.UniversalClient
	// now, when set, is the handler's clock for its key cache.
	now func() time.Time
	// deps, when set, changes the handler's dependencies.
	deps func(*Deps)
}

func testConfig(env *testenv.Env) Config {
	c := env.Config
	return Config{
		Topic: c.Topic, MaxBody: c.MaxBody, DefaultDeadline: c.DefaultDeadline, MinUsefulTime: c.MinUsefulTime,
		ProduceTimeout: 5 * time.Second, MaxBacklogAge: time.Minute,
		TenantRate: 1000, TenantBurst: 2000, MaxQueuedTurns: 10000, IdempotencyTTL: time.Hour,
		RetryAfter: 2 * time.Second, KeyPrefix: c.KeyPrefix,
	}
}

func setup(t *testing.T, opts options) *bundle {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	b := &bundle{env: env, registry: prometheus.NewRegistry()}
	cfg := testConfig(env)
	cfg.BacklogAge = func() time.Duration { return time.Duration(b.backlog.Load()) }
	if opts.cfg != nil {
		opts.cfg(&cfg)
	}
	producer, err := kafka.NewClient(kafka.ProducerOpts(env.Config.BrokerList())...)
	require.NoError(t, err)
	b.producer = producer
	pool, rdb := env.Pool, env.Redis
	if opts.pool != nil {
		pool = opts.pool
	}
	if opts.redis != nil {
		rdb = opts.redis
	}
	b.recorder = record.New(pool, 2*time.Millisecond, env.Log, b.registry)
	require.NoError(t, b.recorder.Start(context.Background()))
	b.signer = streamtoken.New(streamtoken.Options{TTL: time.Hour})
	deps := Deps{
		Producer: producer, Pool: pool, Redis: rdb, Signer: b.signer, Recorder: b.recorder,
		Log: env.Log, Registry: b.registry,
	}
	if opts.deps != nil {
		opts.deps(&deps)
	}
	b.h = New(cfg, deps)
	if opts.now != nil {
		b.h.keys.now = opts.now
	}
	r := chi.NewRouter()
	b.h.Routes(r)
	b.srv = httptest.NewServer(r)
	t.Cleanup(func() {
		b.srv.Close()
		_ = b.h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.recorder.Stop(ctx)
		producer.Close()
	})
	return b
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// apiRouter loads the OpenAPI document once; every request and response of these tests is checked
// against it.
func apiRouter(t testing.TB) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
		if err != nil {
			specErr = err
			return
		}
		if specErr = doc.Validate(context.Background()); specErr != nil {
			return
		}
		doc.Servers = nil
		specRouter, specErr = legacy.NewRouter(doc)
	})
	require.NoError(t, specErr)
	return specRouter
}

// response is an HTTP answer with its body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON(t testing.TB, into any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, into), string(r.Body))
}

// problemType is the last segment of a problem document's type.
func (r response) ProblemType(t testing.TB) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Body))
	var p struct {
		Type string `json:"type"`
	}
	r.JSON(t, &p)
	return p.Type[strings.LastIndexByte(p.Type, '/')+1:]
}

// request describes one call.
type request struct {
	Method, Path string
	Header       map[string]string
	Body         string
	// Unvalidated skips checking the request against the document: for requests that are wrong on
	// purpose (the response is still checked).
	Unvalidated bool
}

// do sends req to base, validating the request (unless marked) and always the response against the
// OpenAPI document.
func do(t testing.TB, base string, req request) response {
	t.Helper()
	hr, err := http.NewRequest(req.Method, base+req.Path, strings.NewReader(req.Body))
	require.NoError(t, err)
	if req.Body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.Header {
		if v == "" {
			hr.Header.Del(k)
			continue
		}
		hr.Header.Set(k, v)
	}
	router := apiRouter(t)
	route, params, err := router.FindRoute(hr)
	require.NoError(t, err, "%s %s is not in the OpenAPI document", req.Method, req.Path)
	in := &openapi3filter.RequestValidationInput{
		Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if !req.Unvalidated {
		vreq := hr.Clone(context.Background())
		vreq.Body = io.NopCloser(strings.NewReader(req.Body))
		in.Request = vreq
		require.NoError(t, openapi3filter.ValidateRequest(context.Background(), in), "request does not match the OpenAPI document")
		in.Request = hr
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(body)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out),
		"response %d %s does not match the OpenAPI document", resp.StatusCode, body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

func postTurn(t testing.TB, base, session, body string, header map[string]string) response {
	t.Helper()
	return do(t, base, request{Method: http.MethodPost, Path: "/v1/sessions/" + session + "/turns", Body: body, Header: header})
}

// recordsInKafka counts the records ever produced to the turns topic.
func (b *bundle) recordsInKafka(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(b.producer).ListEndOffsets(ctx, b.env.Config.Topic)
	require.NoError(t, err)
	var n int64
	offs.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		n += o.Offset
	})
	return n
}

// turnRecords reads every record of the turns topic (the count is known from recordsInKafka).
func (b *bundle) turnRecords(t testing.TB, want int64) []*kgo.Record {
	t.Helper()
	cl, err := kafka.NewClient(kgo.SeedBrokers(b.env.Config.BrokerList()...), kgo.ConsumeTopics(b.env.Config.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(out), want)
		out = append(out, fs.Records()...)
	}
	return out
}

func (b *bundle) failOpen(check string) float64 {
	return testutil.ToFloat64(b.h.failOpen.WithLabelValues(check))
}
