package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func TestRecordHeadersCarryTheTrace(t *testing.T) {
	t.Parallel()
	tp, _ := newProvider(t)
	ctx, span := telemetry.Start(telemetry.WithProvider(context.Background(), tp), "produce")
	defer span.End()
	rec := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "other", Value: []byte("x")}}}
	telemetry.InjectRecord(ctx, rec)
	telemetry.InjectRecord(ctx, rec) // injecting twice keeps one traceparent header
	n := 0
	for _, h := range rec.Headers {
		if h.Key == "traceparent" {
			n++
		}
	}
	require.Equal(t, 1, n)
	got := trace.SpanContextFromContext(telemetry.ExtractRecord(context.Background(), rec))
	require.True(t, got.IsRemote())
	require.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), got.SpanID())

	tpHeader := telemetry.Traceparent(ctx)
	require.Contains(t, tpHeader, span.SpanContext().TraceID().String())
	back := trace.SpanContextFromContext(telemetry.FromTraceparent(context.Background(), tpHeader))
	require.Equal(t, span.SpanContext().TraceID(), back.TraceID())
	require.False(t, trace.SpanContextFromContext(telemetry.FromTraceparent(context.Background(), "garbage")).IsValid())
	require.Empty(t, telemetry.Traceparent(context.Background()))
}

func TestProviderPrecedence(t *testing.T) {
	t.Parallel()
	tp1, exp1 := newProvider(t)
	tp2, exp2 := newProvider(t)
	ctx := telemetry.WithProvider(context.Background(), tp1)
	ctx, parent := telemetry.Start(ctx, "parent")
	// A recording span's provider wins over the context's.
	_, child := telemetry.Start(telemetry.WithProvider(ctx, tp2), "child")
	child.End()
	parent.End()
	require.Len(t, exp1.GetSpans(), 2)
	require.Empty(t, exp2.GetSpans())
}

func TestMiddlewareNamesTheRoute(t *testing.T) {
	t.Parallel()
	tp, exp := newProvider(t)
	r := chi.NewRouter()
	r.With(telemetry.Middleware("intake")).Post("/v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		require.True(t, trace.SpanFromContext(r.Context()).IsRecording())
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	req := httptest.NewRequestWithContext(telemetry.WithProvider(context.Background(), tp), http.MethodPost, "/v1/things/7", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r.ServeHTTP(httptest.NewRecorder(), req)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, "intake POST /v1/things/{id}", spans[0].Name)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", spans[0].SpanContext.TraceID().String())
	require.Equal(t, "Error", spans[0].Status.Code.String())
}

func TestExportIsOffByDefault(t *testing.T) {
	t.Parallel()
	var o telemetry.Options
	tp, err := telemetry.NewProvider(o)
	require.NoError(t, err)
	_, span := tp.Tracer("t").Start(context.Background(), "x")
	require.True(t, span.SpanContext().IsValid(), "spans are made even without export, so logs carry trace IDs")
	require.False(t, span.IsRecording(), "a new trace is not recorded when nothing would export it")
	span.End()
	// A caller's sampled decision is kept, exported or not, so the processes after this one see it.
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	_, child := tp.Tracer("t").Start(parent, "y")
	require.True(t, child.SpanContext().IsSampled())
	child.End()
	require.NoError(t, tp.Shutdown(context.Background()))

	o.OTLPEndpoint = "http://127.0.0.1:1/v1/traces"
	tp, err = telemetry.NewProvider(o)
	require.NoError(t, err)
	require.NoError(t, tp.Shutdown(context.Background()))
}

func TestOptions(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var o telemetry.Options
		require.Equal(t, telemetry.SampleRatioNotExportingDefault, o.Ratio(), "nothing is sampled when nothing is exported")
		o.OTLPEndpoint = "http://otel-collector:4318"
		require.Equal(t, telemetry.SampleRatioExportingDefault, o.Ratio(), "everything is sampled when traces are exported")
		require.Equal(t, 0.0, telemetry.SampleRatioNotExportingDefault)
		require.Equal(t, 1.0, telemetry.SampleRatioExportingDefault)
	})
	t.Run("ExplicitRatioIsKept", func(t *testing.T) {
		t.Parallel()
		tenth, zero := 0.1, 0.0
		o := telemetry.Options{OTLPEndpoint: "http://otel-collector:4318", SampleRatio: &tenth}
		require.Equal(t, 0.1, o.Ratio())
		o.SampleRatio = &zero
		require.Equal(t, 0.0, o.Ratio(), "an explicit 0 is kept, not taken for unset")
	})
	t.Run("ServiceNames", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "turnstile-worker", telemetry.ServiceName([]string{"worker"}))
		require.Equal(t, telemetry.ServiceDefault, telemetry.ServiceName([]string{"intake", "worker"}))
	})
}

// TestStartChildSkipsUnsampledParents checks that a step of an unsampled span gets no span of its
// own (its context still carries the parent's trace), while a sampled parent and no parent get a
// recorded child as from Start.
func TestStartChildSkipsUnsampledParents(t *testing.T) {
	t.Parallel()
	tp, exp := newProvider(t)
	ctx := telemetry.WithProvider(context.Background(), tp)
	for _, c := range []struct {
		name     string
		flags    trace.TraceFlags
		recorded bool
	}{
		{name: "unsampled", flags: 0, recorded: false},
		{name: "sampled", flags: trace.FlagsSampled, recorded: true},
	} {
		parent := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: c.flags, Remote: true,
		})
		pctx := trace.ContextWithRemoteSpanContext(ctx, parent)
		cctx, span := telemetry.StartChild(pctx, "step")
		require.Equal(t, c.recorded, span.IsRecording(), c.name)
		got := trace.SpanContextFromContext(cctx)
		require.Equal(t, parent.TraceID(), got.TraceID(), c.name)
		if c.recorded {
			require.NotEqual(t, parent.SpanID(), got.SpanID(), c.name)
		} else {
			require.Equal(t, parent, got, "%s: the context is the parent's", c.name)
		}
		span.End()
	}
	_, root := telemetry.StartChild(ctx, "root step")
	require.True(t, root.IsRecording(), "no parent: a span as from Start")
	root.End()
	names := []string{}
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	require.ElementsMatch(t, []string{"step", "root step"}, names)
}

// TestTraceparentIsThePropagators checks that Traceparent writes exactly the traceparent header
// the propagator would, for sampled, unsampled and other-flagged span contexts, and nothing for a
// context without a valid one.
func TestTraceparentIsThePropagators(t *testing.T) {
	t.Parallel()
	require.Empty(t, telemetry.Traceparent(context.Background()))
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, 0xff, 0x02} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: flags,
		})
		ctx := trace.ContextWithSpanContext(context.Background(), sc)
		h := http.Header{}
		telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
		require.Equal(t, h.Get("traceparent"), telemetry.Traceparent(ctx), "flags %02x", byte(flags))
	}
}
