package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Defaults, exported so tests and docs can name them.
const (
	RolesDefault                = "broker,intake,worker,gateway,a2a,aisdk,langgraph,notifier"
	HTTPAddrDefault             = "127.0.0.1:8080"
	TrustedProxiesDefault       = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"
	LogFormatDefault            = "text"
	LogLevelDefault             = "info"
	MigrateDefault              = "auto"
	DatabaseURLDefault          = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	RedisURLDefault             = "redis://127.0.0.1:6379/0"
	KafkaBrokersDefault         = "127.0.0.1:9092"
	BrokerAddrDefault           = "127.0.0.1:9092"
	TopicDefault                = "turns"
	DLQTopicDefault             = "turns.dlq"
	PartitionsDefault           = 8
	ConsumerGroupDefault        = "turnstile-workers"
	KeyPrefixDefault            = "ts"
	MaxInflightDefault          = 256
	LeaseTTLDefault             = 15 * time.Second
	HeartbeatDefault            = 3 * time.Second
	MaxAttemptsDefault          = 3
	MinUsefulTimeDefault        = time.Second
	DefaultDeadlineDefault      = 10 * time.Minute
	DrainTimeoutDefault         = 30 * time.Second
	RetentionDefault            = 7 * 24 * time.Hour
	StreamRetentionDefault      = 24 * time.Hour
	StreamMaxLenDefault         = 10000
	KeepAliveDefault            = 15 * time.Second
	ProduceTimeoutDefault       = 5 * time.Second
	MaxBodyDefault              = 256 << 10
	AgentDefault                = "demo"
	DemoDelayDefault            = 25 * time.Millisecond
	DemoFaultsDefault           = "auto"
	AgentsReloadIntervalDefault = 5 * time.Second
	ShutdownTimeoutDefault      = 45 * time.Second
)

// KnownRoles is every role a process may run, in start order.
var KnownRoles = []string{"broker", "intake", "worker", "gateway", "a2a", "langgraph", "aisdk", "notifier", "router"}

// routeRoles are the roles that serve API routes, which the router (serving every path by
// forwarding it) cannot share a process with.
var routeRoles = []string{"intake", "gateway", "a2a", "langgraph", "aisdk"}

// Config is every setting of every role. Roles read only the fields they need.
//
// docs/CONFIGURATION.md is generated from this struct and the settings structs it holds (`make
// docs`): each "# Title" comment group starts a section of that document, each field's comment
// becomes its row, with the sentence that begins "Defaults to" as the default. A test fails when
// a field lacks either, or when the document is stale.
type Config struct {
	// # Every role
	//
	// Read by every process, whatever roles it runs.

	// Roles is the comma list of roles this process runs: broker, intake, worker, gateway, a2a,
	// aisdk, langgraph, notifier, router. The router forwards every path to the regions, so it
	// runs in a process without intake, gateway, a2a, aisdk and langgraph. Defaults to
	// "broker,intake,worker,gateway,a2a,aisdk,langgraph,notifier" for the turnstile binary; a
	// single-role binary defaults to its own role.
	Roles string `env:"TURNSTILE_ROLES"`
	// HTTPAddr is where the process serves its API, the demo pages, /healthz, /readyz and
	// /metrics: every role on one port, HTTP/1.1 and HTTP/2 cleartext with prior knowledge (h2c,
	// at most 1,000 streams a connection). Defaults to 127.0.0.1:8080.
	HTTPAddr string `env:"TURNSTILE_HTTP_ADDR"`
	// TrustedProxies is a comma list of networks (CIDR) whose forwarding headers are believed:
	// X-Forwarded-Host and -Proto for the Agent Card's URL, X-Forwarded-For for the client address
	// that intake's unknown-key budget is kept by. From any other peer they are ignored, so a client
	// reaching a replica directly can neither name another host on a card that caches keep nor pose
	// as many clients. "none" trusts no peer. Defaults to loopback and the private ranges, where a
	// region's router, an ingress or a sidecar proxy sits.
	TrustedProxies string `env:"TURNSTILE_TRUSTED_PROXIES"`
	// InstanceID names this process in leases and logs. Defaults to the host name and the process
	// ID, as hostname-pid.
	InstanceID string `env:"TURNSTILE_INSTANCE_ID"`
	// LogFormat is "text" (readable) or "json". Defaults to text.
	LogFormat string `env:"TURNSTILE_LOG_FORMAT"`
	// LogLevel is "debug", "info", "warn" or "error". Defaults to info.
	LogLevel string `env:"TURNSTILE_LOG_LEVEL"`
	// PprofAddr is where the process serves Go's net/http/pprof (/debug/pprof/), on a listener of
	// its own so the API's address never exposes it. Defaults to none: not served.
	PprofAddr string `env:"TURNSTILE_PPROF_ADDR"`
	// Migrate is "auto" (apply the embedded migrations at start) or "off" (leave them to the
	// binary's migrate command). Defaults to auto.
	Migrate string `env:"TURNSTILE_MIGRATE"`
	// ShutdownTimeout bounds a whole graceful shutdown, every role's drain included. Defaults to
	// 45s.
	ShutdownTimeout time.Duration `env:"TURNSTILE_SHUTDOWN_TIMEOUT"`

	// # Postgres and Redis
	//
	// Where the roles that keep state find their stores.

	// DatabaseURL is the Postgres connection URL. Defaults to
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
	DatabaseURL string `env:"TURNSTILE_DATABASE_URL"`
	// DatabaseSchema confines every table to this Postgres schema (tests use one per test).
	// Defaults to none: the connection's search path.
	DatabaseSchema string `env:"TURNSTILE_DATABASE_SCHEMA"`
	// RedisURL is the Redis connection URL. Defaults to redis://127.0.0.1:6379/0.
	RedisURL string `env:"TURNSTILE_REDIS_URL"`
	// RedisClusterAddrs is a comma list of Redis Cluster node addresses; set, it switches the
	// Redis client to cluster mode and TURNSTILE_REDIS_URL is not used. Defaults to none: a single
	// Redis.
	RedisClusterAddrs string `env:"TURNSTILE_REDIS_CLUSTER_ADDRS"`
	// KeyPrefix starts every Redis key and channel, so several stacks can share one Redis.
	// Defaults to ts.
	KeyPrefix string `env:"TURNSTILE_KEY_PREFIX"`

	// # Kafka and the embedded broker
	//
	// The turns topic that intake produces to and workers consume, and the broker role, an
	// embedded Kafka-protocol broker that keeps its records in memory only.

	// KafkaBrokers is the comma list of Kafka bootstrap brokers. Defaults to
	// TURNSTILE_BROKER_ADDR in a process that runs the broker role (so moving the embedded broker
	// is one setting), else 127.0.0.1:9092.
	KafkaBrokers string `env:"TURNSTILE_KAFKA_BROKERS"`
	// BrokerAddr is where the broker role's embedded broker listens. Defaults to 127.0.0.1:9092.
	BrokerAddr string `env:"TURNSTILE_BROKER_ADDR"`
	// Topic is the turns topic. Defaults to turns.
	Topic string `env:"TURNSTILE_KAFKA_TOPIC"`
	// DLQTopic is the dead-letter topic, where a turn that used up its attempts is copied with its
	// last error. Defaults to turns.dlq.
	DLQTopic string `env:"TURNSTILE_KAFKA_DLQ_TOPIC"`
	// Partitions is the partition count of the topics when turnstile creates them. Defaults to 8.
	Partitions int `env:"TURNSTILE_KAFKA_PARTITIONS"`
	// ConsumerGroup is the workers' consumer group. Defaults to turnstile-workers.
	ConsumerGroup string `env:"TURNSTILE_KAFKA_GROUP"`

	// # Intake
	//
	// The intake role: admission, quotas and the re-driver of turns whose Kafka record was lost.

	// ProduceTimeout is how long intake waits for Kafka to acknowledge a turn before answering
	// 503. Defaults to 5s.
	ProduceTimeout time.Duration `env:"TURNSTILE_PRODUCE_TIMEOUT"`
	// MaxBody is the largest request body intake accepts, in bytes. Defaults to 262144 (256 KiB).
	MaxBody int64 `env:"TURNSTILE_MAX_BODY"`
	// DefaultDeadline is the deadline of a turn that names none (X-Deadline-Epoch-Ms).
	// Defaults to 10m.
	DefaultDeadline time.Duration `env:"TURNSTILE_DEFAULT_DEADLINE"`
	Intake          IntakeSettings
	// Schedules are intake's scheduled turns (the native /v1/schedules, LangGraph's crons).
	Schedules ScheduleSettings

	// # Worker
	//
	// The worker role: how many turns it runs, their leases and attempts, its consumer group and
	// the housekeeping of finished rows.

	// MaxInflight bounds the turns one worker runs at once. It matches the upstream guard's
	// default ceiling (TURNSTILE_UPSTREAM_MAX_LIMIT); the README's "Turns in flight per worker"
	// says what a turn costs. Defaults to 256.
	MaxInflight int `env:"TURNSTILE_WORKER_MAX_INFLIGHT"`
	// LeaseTTL is how long a claim's lease lasts without renewal; a dead worker's turns are taken
	// over once it lapses. Defaults to 15s.
	LeaseTTL time.Duration `env:"TURNSTILE_LEASE_TTL"`
	// Heartbeat is the interval of the batched lease renewal (one statement for every lease of
	// the worker), at most half of TURNSTILE_LEASE_TTL. Defaults to 3s, or a fifth of a lease
	// shorter than 15s.
	Heartbeat time.Duration `env:"TURNSTILE_HEARTBEAT_INTERVAL"`
	// MaxAttempts is how many attempts a turn gets before it is failed and dead-lettered.
	// Defaults to 3.
	MaxAttempts int `env:"TURNSTILE_MAX_ATTEMPTS"`
	// MinUsefulTime is the least time before its deadline a turn needs to start; with less it
	// never starts and ends turn.expired. Defaults to 1s.
	MinUsefulTime time.Duration `env:"TURNSTILE_MIN_USEFUL_TIME"`
	// DrainTimeout is how long running turns may finish on SIGTERM before the worker hands them
	// off (releases their leases for another worker). Defaults to 30s.
	DrainTimeout time.Duration `env:"TURNSTILE_DRAIN_TIMEOUT"`
	// Retention is the age past which finished turn rows are deleted, and then session rows left
	// without turns and idle as long. Defaults to 168h (7 days).
	Retention time.Duration `env:"TURNSTILE_RETENTION"`
	Worker    WorkerSettings

	// # Agents
	//
	// Which agent the workers run, and the settings of each adapter.

	// Agent is the adapter workers run: demo, openai, http or a2a (README, "Agents"). Defaults to
	// demo.
	Agent string `env:"TURNSTILE_AGENT"`
	// DemoDelay is the demo agent's pause before each word. Defaults to 25ms.
	DemoDelay time.Duration `env:"TURNSTILE_DEMO_DELAY"`
	// DemoFaults says whether the demo agent obeys the knobs that fail or panic an attempt on
	// purpose (fail_attempts, panic_attempts, fail_after_tool_attempts): "allow", "deny", or
	// "auto" (allow unless TURNSTILE_AUTH=on, so a tenant cannot fail its own turns at will).
	// Defaults to auto.
	DemoFaults string `env:"TURNSTILE_DEMO_FAULTS"`
	// AgentsFile is the agents catalog (pkg/agents; README, "Many agents"): a YAML or JSON file
	// naming each agent with its adapter, settings, limits and what its front doors publish.
	// Settings an agent leaves out take this section's values. Defaults to none: one agent named
	// "agent", built from TURNSTILE_AGENT and the settings of this section.
	AgentsFile string `env:"TURNSTILE_AGENTS_FILE"`
	// AgentsReloadInterval is how often TURNSTILE_AGENTS_FILE is read again for changes; a bad
	// file keeps the last good catalog. Defaults to 5s.
	AgentsReloadInterval time.Duration `env:"TURNSTILE_AGENTS_RELOAD_INTERVAL"`
	// WorkerAgents is the comma list of agents a worker serves: it consumes only their turns.
	// Defaults to the catalog's default agent.
	WorkerAgents string `env:"TURNSTILE_WORKER_AGENTS"`
	Agents       AgentSettings

	// # Gateway
	//
	// The gateway role, which relays each session's Redis Stream to browsers over Server-Sent
	// Events, and the bounds of those streams.

	// StreamRetention is the age bound and idle TTL of a session's event stream in Redis.
	// Defaults to 24h.
	StreamRetention time.Duration `env:"TURNSTILE_STREAM_RETENTION"`
	// StreamMaxLen is the approximate length bound of a session's event stream. Defaults to 10000.
	StreamMaxLen int64 `env:"TURNSTILE_STREAM_MAXLEN"`
	// KeepAlive is the interval of the keep-alive comment lines on every stream. Defaults to 15s.
	KeepAlive time.Duration `env:"TURNSTILE_KEEPALIVE"`
	Gateway   GatewaySettings

	// # Authentication
	//
	// API keys at intake and the front doors, stream tokens at the gateway.

	Auth AuthSettings

	// # Protocol front doors
	//
	// The a2a, aisdk and langgraph roles translate their protocols to the native API; they find
	// it here.

	FrontDoor FrontDoorSettings
	A2A       A2ASettings
	LangGraph LangGraphSettings
	// LangGraphStore bounds the langgraph role's store (the SDK's client.store).
	LangGraphStore LangGraphStoreSettings

	// # Notifier
	//
	// The notifier role, which delivers the outbox's webhooks and A2A push notifications.

	Notifier NotifierSettings

	// # Regions and the router
	//
	// Several regions acting as one service (README, "Regions"), and the router role in front of
	// them. All unset is a single region.

	Region RegionSettings
	Router RouterSettings

	// # Agent registry
	//
	// Agent replicas registering with leases on intake, and the workers' snapshots of them
	// (docs/REGISTRY.md).

	Registry RegistrySettings

	// # Observability
	//
	// The backlog-age signal and tracing.

	Ops OpsSettings
}

// Load reads the environment and fills defaults. It does not validate; call Validate.
func Load() (Config, error) {
	var c Config
	if err := env.Parse(&c); err != nil {
		return Config{}, fmt.Errorf("read TURNSTILE_* environment: %s", nameVariables(err.Error()))
	}
	c.ApplyDefaults()
	return c, nil
}

// Default returns a Config with every default filled, as an empty environment would give.
func Default() Config {
	var c Config
	c.ApplyDefaults()
	return c
}

// ApplyDefaults replaces every zero field with its default.
func (c *Config) ApplyDefaults() {
	str := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	dur := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	str(&c.Roles, RolesDefault)
	str(&c.HTTPAddr, HTTPAddrDefault)
	str(&c.TrustedProxies, TrustedProxiesDefault)
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = host + "-" + strconv.Itoa(os.Getpid())
	}
	str(&c.LogFormat, LogFormatDefault)
	str(&c.LogLevel, LogLevelDefault)
	str(&c.Migrate, MigrateDefault)
	str(&c.DatabaseURL, DatabaseURLDefault)
	str(&c.RedisURL, RedisURLDefault)
	str(&c.KeyPrefix, KeyPrefixDefault)
	str(&c.BrokerAddr, BrokerAddrDefault)
	if c.KafkaBrokers == "" && c.HasRole("broker") {
		c.KafkaBrokers = dialAddr(c.BrokerAddr)
	}
	str(&c.KafkaBrokers, KafkaBrokersDefault)
	str(&c.Topic, TopicDefault)
	str(&c.DLQTopic, DLQTopicDefault)
	if c.Partitions == 0 {
		c.Partitions = PartitionsDefault
	}
	str(&c.ConsumerGroup, ConsumerGroupDefault)
	if c.MaxInflight == 0 {
		c.MaxInflight = MaxInflightDefault
	}
	dur(&c.LeaseTTL, LeaseTTLDefault)
	// A short lease gets a proportionally short heartbeat: five renewals per lease, at most 3s apart.
	dur(&c.Heartbeat, min(HeartbeatDefault, c.LeaseTTL/5))
	if c.MaxAttempts == 0 {
		c.MaxAttempts = MaxAttemptsDefault
	}
	dur(&c.MinUsefulTime, MinUsefulTimeDefault)
	dur(&c.DefaultDeadline, DefaultDeadlineDefault)
	dur(&c.DrainTimeout, DrainTimeoutDefault)
	dur(&c.Retention, RetentionDefault)
	dur(&c.StreamRetention, StreamRetentionDefault)
	if c.StreamMaxLen == 0 {
		c.StreamMaxLen = StreamMaxLenDefault
	}
	dur(&c.KeepAlive, KeepAliveDefault)
	dur(&c.ProduceTimeout, ProduceTimeoutDefault)
	if c.MaxBody == 0 {
		c.MaxBody = MaxBodyDefault
	}
	str(&c.Agent, AgentDefault)
	dur(&c.DemoDelay, DemoDelayDefault)
	dur(&c.AgentsReloadInterval, AgentsReloadIntervalDefault)
	str(&c.DemoFaults, DemoFaultsDefault)
	dur(&c.ShutdownTimeout, ShutdownTimeoutDefault)
	c.Auth.applyDefaults()
	c.Intake.applyDefaults()
	c.Schedules.applyDefaults()
	c.Worker.applyDefaults()
	c.Gateway.applyDefaults()
	c.Agents.applyDefaults()
	c.Ops.applyDefaults()
	c.A2A.applyDefaults()
	c.LangGraph.applyDefaults()
	c.LangGraphStore.applyDefaults()
	c.Notifier.applyDefaults()
	c.Router.applyDefaults()
	c.Registry.applyDefaults()
}

// nameVariables rewrites the parser's Go field names ("LeaseTTL") into the variables an operator
// set ("TURNSTILE_LEASE_TTL").
func nameVariables(msg string) string {
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
				walk(f.Type)
				continue
			}
			if tag := f.Tag.Get("env"); tag != "" {
				msg = strings.ReplaceAll(msg, `field "`+f.Name+`"`, tag)
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	return msg
}

// RoleList splits Roles into its names.
func (c Config) RoleList() []string {
	var out []string
	for _, r := range strings.Split(c.Roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// HasRole reports whether this process runs the named role.
func (c Config) HasRole(name string) bool {
	for _, r := range c.RoleList() {
		if r == name {
			return true
		}
	}
	return false
}

// dialAddr is the address a client of this process dials to reach a listener on addr: a listener on
// every interface (no host, 0.0.0.0 or ::) is reached on loopback.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		return net.JoinHostPort("127.0.0.1", port)
	case "::":
		return net.JoinHostPort("::1", port)
	}
	return addr
}

// BrokerList splits KafkaBrokers.
func (c Config) BrokerList() []string { return splitList(c.KafkaBrokers) }

// RedisClusterList splits RedisClusterAddrs.
func (c Config) RedisClusterList() []string { return splitList(c.RedisClusterAddrs) }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// TrustedProxyList parses TrustedProxies; "none" is the empty list.
func (c Config) TrustedProxyList() ([]netip.Prefix, error) {
	if strings.TrimSpace(c.TrustedProxies) == "none" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, e := range splitList(c.TrustedProxies) {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("TURNSTILE_TRUSTED_PROXIES: %q is not a CIDR network (or use none)", e)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Validate checks every bound and returns all violations joined.
func (c Config) Validate() error {
	known := map[string]bool{}
	for _, r := range KnownRoles {
		known[r] = true
	}
	var errs []error
	for _, r := range c.RoleList() {
		if !known[r] {
			errs = append(errs, fmt.Errorf("TURNSTILE_ROLES: unknown role %q (want one of %s)", r, strings.Join(KnownRoles, ", ")))
		}
	}
	if c.HasRole("router") {
		for _, r := range routeRoles {
			if c.HasRole(r) {
				errs = append(errs, fmt.Errorf("TURNSTILE_ROLES: router forwards every path, so it runs without %s", r))
			}
		}
	}
	_, proxiesErr := c.TrustedProxyList()
	checks := []struct {
		bad bool
		msg string
	}{
		{len(c.RoleList()) == 0, "TURNSTILE_ROLES: no role named"},
		{proxiesErr != nil, "TURNSTILE_TRUSTED_PROXIES: must be a comma list of CIDR networks, or none"},
		{c.LogFormat != "text" && c.LogFormat != "json", "TURNSTILE_LOG_FORMAT: must be text or json"},
		{c.Migrate != "auto" && c.Migrate != "off", "TURNSTILE_MIGRATE: must be auto or off"},
		{c.Partitions < 1 || c.Partitions > 10000, "TURNSTILE_KAFKA_PARTITIONS: must be between 1 and 10000"},
		{c.MaxInflight < 1 || c.MaxInflight > 100000, "TURNSTILE_WORKER_MAX_INFLIGHT: must be between 1 and 100000"},
		{c.LeaseTTL < 100*time.Millisecond, "TURNSTILE_LEASE_TTL: must be at least 100ms"},
		{c.Heartbeat <= 0 || c.Heartbeat*2 > c.LeaseTTL, "TURNSTILE_HEARTBEAT_INTERVAL: must be positive and at most half of TURNSTILE_LEASE_TTL"},
		{c.MaxAttempts < 1 || c.MaxAttempts > 100, "TURNSTILE_MAX_ATTEMPTS: must be between 1 and 100"},
		{c.MinUsefulTime < 0, "TURNSTILE_MIN_USEFUL_TIME: must not be negative"},
		{c.DefaultDeadline <= c.MinUsefulTime, "TURNSTILE_DEFAULT_DEADLINE: must exceed TURNSTILE_MIN_USEFUL_TIME"},
		{c.DrainTimeout < 0, "TURNSTILE_DRAIN_TIMEOUT: must not be negative"},
		{c.StreamMaxLen < 10, "TURNSTILE_STREAM_MAXLEN: must be at least 10"},
		{c.StreamRetention < time.Second, "TURNSTILE_STREAM_RETENTION: must be at least 1s"},
		{c.KeepAlive < 10*time.Millisecond, "TURNSTILE_KEEPALIVE: must be at least 10ms"},
		{c.ProduceTimeout <= 0, "TURNSTILE_PRODUCE_TIMEOUT: must be positive"},
		{c.MaxBody < 1024, "TURNSTILE_MAX_BODY: must be at least 1024 bytes"},
		{c.DemoFaults != "auto" && c.DemoFaults != "allow" && c.DemoFaults != "deny", "TURNSTILE_DEMO_FAULTS: must be auto, allow or deny"},
		{c.AgentsReloadInterval < 10*time.Millisecond, "TURNSTILE_AGENTS_RELOAD_INTERVAL: must be at least 10ms"},
	}
	for _, ch := range checks {
		if ch.bad {
			errs = append(errs, errors.New(ch.msg))
		}
	}
	errs = append(errs, c.Auth.validate()...)
	errs = append(errs, c.Intake.validate()...)
	errs = append(errs, c.Schedules.validate()...)
	errs = append(errs, c.Worker.validate()...)
	errs = append(errs, c.Gateway.validate()...)
	errs = append(errs, c.Agents.validate()...)
	errs = append(errs, c.Ops.validate()...)
	errs = append(errs, c.LangGraph.validate()...)
	errs = append(errs, c.LangGraphStore.validate()...)
	errs = append(errs, c.FrontDoor.validate()...)
	errs = append(errs, c.A2A.validate()...)
	errs = append(errs, c.Notifier.validate()...)
	errs = append(errs, c.Router.validate()...)
	errs = append(errs, c.Registry.validate()...)
	errs = append(errs, c.Region.validate()...)
	return errors.Join(errs...)
}

// WorkerAgentList splits WorkerAgents.
func (c Config) WorkerAgentList() []string { return splitList(c.WorkerAgents) }

// DemoFaultsAllowed reports whether the demo agent obeys its fault knobs (see DemoFaults).
func (c Config) DemoFaultsAllowed() bool {
	switch c.DemoFaults {
	case "allow":
		return true
	case "deny":
		return false
	default:
		return !c.Auth.Enabled()
	}
}
