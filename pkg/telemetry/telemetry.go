package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// InstrumentationName names turnstile's tracer.
const InstrumentationName = "github.com/turnstile-run/turnstile"

// Propagator is the W3C Trace Context propagator used on every carrier.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Provider defaults.
const (
	// ServiceDefault is the service name of a provider whose Options name none.
	ServiceDefault = "turnstile"
	// SampleRatioExportingDefault is the fraction of new traces sampled when spans are exported.
	SampleRatioExportingDefault = 1.0
	// SampleRatioNotExportingDefault is the fraction of new traces sampled when nothing exports
	// them: a sampled span is recorded in full whether or not anything exports it, while an
	// unsampled one still carries its trace and span IDs for logs and propagation.
	SampleRatioNotExportingDefault = 0.0
)

// Options configure NewProvider. The zero value is a provider that makes spans (so logs carry
// trace IDs and context propagates) but neither records nor exports new traces.
type Options struct {
	// Service is the resource's service.name. Defaults to ServiceDefault ("turnstile"); see
	// ServiceName for the name of a process's roles.
	Service string
	// Instance is the resource's service.instance.id. Defaults to empty.
	Instance string
	// OTLPEndpoint, when set, is the URL of an OTLP/HTTP collector (e.g.
	// http://otel-collector:4318) that spans are exported to in batches. Defaults to empty:
	// nothing is exported.
	OTLPEndpoint string
	// SampleRatio is the fraction of new traces sampled; a caller's decision (the traceparent's
	// sampled flag) is kept. Nil means the default: SampleRatioExportingDefault (1) with an
	// OTLPEndpoint, SampleRatioNotExportingDefault (0) without. An explicit 0 is kept.
	SampleRatio *float64
}

// Ratio is the fraction of new traces a provider built from o samples: SampleRatio when set, else
// the default that follows OTLPEndpoint.
func (o Options) Ratio() float64 {
	switch {
	case o.SampleRatio != nil:
		return *o.SampleRatio
	case o.OTLPEndpoint != "":
		return SampleRatioExportingDefault
	default:
		return SampleRatioNotExportingDefault
	}
}

// NewProvider builds a process's tracer provider: parent-based, sampling new traces by o.Ratio(),
// and exporting over OTLP/HTTP in batches when o.OTLPEndpoint is set, otherwise not exporting at
// all.
func NewProvider(o Options) (*sdktrace.TracerProvider, error) {
	if o.Service == "" {
		o.Service = ServiceDefault
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Ratio()))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(o.Service), semconv.ServiceInstanceID(o.Instance))),
	}
	if o.OTLPEndpoint != "" {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(o.OTLPEndpoint))
		if err != nil {
			return nil, fmt.Errorf("create otlp exporter for %q: %w", o.OTLPEndpoint, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

type providerKey struct{}

// WithProvider returns a context whose spans Start makes with tp.
func WithProvider(ctx context.Context, tp trace.TracerProvider) context.Context {
	if tp == nil {
		return ctx
	}
	return context.WithValue(ctx, providerKey{}, tp)
}

// Provider is the tracer provider for ctx: that of its recording span, else the one set by
// WithProvider, else the global one.
func Provider(ctx context.Context) trace.TracerProvider {
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		return sp.TracerProvider()
	}
	if tp, ok := ctx.Value(providerKey{}).(trace.TracerProvider); ok {
		return tp
	}
	return otel.GetTracerProvider()
}

// Start starts a span named name, a child of ctx's span (local or remote).
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Provider(ctx).Tracer(InstrumentationName).Start(ctx, name, opts...)
}

// StartChild is Start for a step inside a span that may be unsampled: when ctx's span is valid and
// not sampled, it returns ctx unchanged and a span that records nothing. Under NewProvider's
// parent-based sampler every child of an unsampled span is unsampled too, so creating one would
// only mint a span ID nobody sees; a span with no parent, or a sampled one, gets its child as from
// Start.
func StartChild(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if Unsampled(ctx) {
		return ctx, noSpan
	}
	return Start(ctx, name, opts...)
}

// Unsampled reports whether ctx's span is valid and not sampled: StartChild would return ctx and a
// span that records nothing. A caller about to start several children can ask once, and skip even
// making their names.
func Unsampled(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

// noSpan is a span that records nothing: that of a context without one.
var noSpan = trace.SpanFromContext(context.Background())

// End ends span, recording err when not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes(err))
	}
	span.End()
}

// recordCarrier adapts Kafka record headers to the propagator.
type recordCarrier struct{ rec *kgo.Record }

func (c recordCarrier) Get(key string) string {
	for _, h := range c.rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c recordCarrier) Set(key, value string) {
	for i, h := range c.rec.Headers {
		if h.Key == key {
			c.rec.Headers[i].Value = []byte(value)
			return
		}
	}
	c.rec.Headers = append(c.rec.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c recordCarrier) Keys() []string {
	out := make([]string, len(c.rec.Headers))
	for i, h := range c.rec.Headers {
		out[i] = h.Key
	}
	return out
}

// InjectRecord writes ctx's trace context into the record's headers (traceparent, tracestate).
func InjectRecord(ctx context.Context, rec *kgo.Record) { Propagator.Inject(ctx, recordCarrier{rec}) }

// ExtractRecord returns ctx with the record's trace context as its remote parent.
func ExtractRecord(ctx context.Context, rec *kgo.Record) context.Context {
	return Propagator.Extract(ctx, recordCarrier{rec})
}

// Traceparent renders ctx's span context as a W3C traceparent value, or "" when it has none. It
// is what Propagator writes as the traceparent header (version 00, the sampled and random flags
// kept; TestTraceparentIsThePropagators holds it to that), formatted directly rather than through
// a carrier map, since the worker renders one for the events of every turn it runs.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte // 00-<32 hex>-<16 hex>-<2 hex>
	b[0], b[1], b[2], b[35], b[52] = '0', '0', '-', '-', '-'
	hex.Encode(b[3:35], tid[:])
	hex.Encode(b[36:52], sid[:])
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
	return string(b[:])
}

// FromTraceparent returns ctx with the span context of a traceparent value as its remote parent;
// an empty or malformed value leaves ctx as it is.
func FromTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Middleware wraps each request in a server span named "<service> <route pattern>", a child of the
// request's traceparent header when it has one.
func Middleware(service string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := Start(ctx, service+" "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
			defer span.End()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r.WithContext(ctx))
			if rc := chi.RouteContext(r.Context()); rc != nil {
				if p := rc.RoutePattern(); p != "" {
					span.SetName(service + " " + r.Method + " " + p)
					span.SetAttributes(attribute.String("http.route", p))
				}
			}
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				span.SetStatus(codesError, http.StatusText(sw.status))
			}
		})
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TurnAttributes are the attributes every span about one turn carries; turnstile.session_id is
// the session's key, which names the tenant too.
func TurnAttributes(turnID string, session wire.SessionKey, attempt int) trace.SpanStartEventOption {
	attrs := []attribute.KeyValue{attribute.String("turnstile.turn_id", turnID), attribute.String("turnstile.session_id", session.String())}
	if attempt > 0 {
		attrs = append(attrs, attribute.Int("turnstile.attempt", attempt))
	}
	return trace.WithAttributes(attrs...)
}

// AgentAttribute names the catalog's agent (pkg/agents) a span's turn goes to.
func AgentAttribute(name string) attribute.KeyValue { return attribute.String("turnstile.agent", name) }

// ServiceName names a process's service from its roles: turnstile-<role> for one role, turnstile
// for several.
func ServiceName(roles []string) string {
	if len(roles) == 1 {
		return ServiceDefault + "-" + roles[0]
	}
	return ServiceDefault
}
