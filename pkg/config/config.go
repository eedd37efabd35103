package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Defaults, exported so tests and docs can name them.
const (
	RolesDefault           = "broker,intake,worker,gateway,a2a,aisdk,langgraph,notifier"
	HTTPAddrDefault        = "127.0.0.1:8080"
	LogFormatDefault       = "text"
	LogLevelDefault        = "info"
	MigrateDefault         = "auto"
	DatabaseURLDefault     = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	RedisURLDefault        = "redis://127.0.0.1:6379/0"
	KafkaBrokersDefault    = "127.0.0.1:9092"
	BrokerAddrDefault      = "127.0.0.1:9092"
	TopicDefault           = "turns"
	DLQTopicDefault        = "turns.dlq"
	PartitionsDefault      = 8
	ConsumerGroupDefault   = "turnstile-workers"
	KeyPrefixDefault       = "ts"
	MaxInflightDefault     = 256
	LeaseTTLDefault        = 15 * time.Second
	HeartbeatDefault       = 3 * time.Second
	MaxAttemptsDefault     = 3
	MinUsefulTimeDefault   = time.Second
	DefaultDeadlineDefault = 10 * time.Minute
	DrainTimeoutDefault    = 30 * time.Second
	RetentionDefault       = 7 * 24 * time.Hour
	StreamRetentionDefault = 24 * time.Hour
	StreamMaxLenDefault    = 10000
	KeepAliveDefault       = 15 * time.Second
	ProduceTimeoutDefault  = 5 * time.Second
	MaxBodyDefault         = 256 << 10
	AgentDefault           = "demo"
	DemoDelayDefault       = 25 * time.Millisecond
	DemoFaultsDefault      = "auto"
	ShutdownTimeoutDefault = 45 * time.Second
)

// KnownRoles is every role a process may run, in start order.
var KnownRoles = []string{"broker", "intake", "worker", "gateway", "a2a", "langgraph", "aisdk", "notifier", "router"}

// routeRoles are the roles that serve API routes, which the router (serving every path by
// forwarding it) cannot share a process with.
var routeRoles = []string{"intake", "gateway", "a2a", "langgraph", "aisdk"}

// Config is every setting of every role. Roles read only the fields they need.
type Config struct {
	// Roles is the comma list of roles this process runs: broker, intake, worker, gateway, a2a, aisdk,
	// langgraph, notifier, router. The default is every role but the router, which forwards every
	// path to the regions and so runs without the roles that serve API routes.
	Roles string `env:"TURNSTILE_ROLES"`
	// HTTPAddr is where the process serves its API, /healthz, /readyz and /metrics.
	HTTPAddr string `env:"TURNSTILE_HTTP_ADDR"`
	// InstanceID names this process in leases and logs. Defaults to hostname-pid.
	InstanceID string `env:"TURNSTILE_INSTANCE_ID"`
	// LogFormat is "text" (readable, the dev default) or "json".
	LogFormat string `env:"TURNSTILE_LOG_FORMAT"`
	// LogLevel is debug, info, warn or error. Defaults to info.
	LogLevel string `env:"TURNSTILE_LOG_LEVEL"`
	// PprofAddr, when set, is where the process serves net/http/pprof (/debug/pprof/), on a
	// listener of its own so the API's address never exposes it. Empty (the default) serves none.
	PprofAddr string `env:"TURNSTILE_PPROF_ADDR"`
	// Migrate is "auto" (apply migrations at start, the dev default) or "off".
	Migrate string `env:"TURNSTILE_MIGRATE"`

	DatabaseURL string `env:"TURNSTILE_DATABASE_URL"`
	// DatabaseSchema, when set, confines every table to that Postgres schema (tests use one per test).
	DatabaseSchema string `env:"TURNSTILE_DATABASE_SCHEMA"`
	RedisURL       string `env:"TURNSTILE_REDIS_URL"`
	// RedisClusterAddrs, a comma list, switches the Redis client to cluster mode.
	RedisClusterAddrs string `env:"TURNSTILE_REDIS_CLUSTER_ADDRS"`
	// KeyPrefix starts every Redis key and channel, so several stacks can share one Redis.
	KeyPrefix string `env:"TURNSTILE_KEY_PREFIX"`

	// KafkaBrokers is the comma list of Kafka bootstrap brokers the process connects to. When unset
	// in a process that runs the broker role it follows BrokerAddr, so moving the embedded broker
	// is one setting; otherwise it defaults to 127.0.0.1:9092.
	KafkaBrokers string `env:"TURNSTILE_KAFKA_BROKERS"`
	// BrokerAddr is where the broker role's embedded Kafka broker listens. Defaults to
	// 127.0.0.1:9092.
	BrokerAddr    string `env:"TURNSTILE_BROKER_ADDR"`
	Topic         string `env:"TURNSTILE_KAFKA_TOPIC"`
	DLQTopic      string `env:"TURNSTILE_KAFKA_DLQ_TOPIC"`
	Partitions    int    `env:"TURNSTILE_KAFKA_PARTITIONS"`
	ConsumerGroup string `env:"TURNSTILE_KAFKA_GROUP"`

	// MaxInflight bounds the turns one worker runs at once. Defaults to 256, the upstream guard's
	// default ceiling (README, "Turns in flight per worker", gives the measurement behind it).
	MaxInflight     int           `env:"TURNSTILE_WORKER_MAX_INFLIGHT"`
	LeaseTTL        time.Duration `env:"TURNSTILE_LEASE_TTL"`
	Heartbeat       time.Duration `env:"TURNSTILE_HEARTBEAT_INTERVAL"`
	MaxAttempts     int           `env:"TURNSTILE_MAX_ATTEMPTS"`
	MinUsefulTime   time.Duration `env:"TURNSTILE_MIN_USEFUL_TIME"`
	DefaultDeadline time.Duration `env:"TURNSTILE_DEFAULT_DEADLINE"`
	DrainTimeout    time.Duration `env:"TURNSTILE_DRAIN_TIMEOUT"`
	Retention       time.Duration `env:"TURNSTILE_RETENTION"`

	StreamRetention time.Duration `env:"TURNSTILE_STREAM_RETENTION"`
	StreamMaxLen    int64         `env:"TURNSTILE_STREAM_MAXLEN"`
	KeepAlive       time.Duration `env:"TURNSTILE_KEEPALIVE"`

	ProduceTimeout time.Duration `env:"TURNSTILE_PRODUCE_TIMEOUT"`
	MaxBody        int64         `env:"TURNSTILE_MAX_BODY"`

	Agent     string        `env:"TURNSTILE_AGENT"`
	DemoDelay time.Duration `env:"TURNSTILE_DEMO_DELAY"`
	// DemoFaults says whether the demo agent obeys the knobs that fail or panic an attempt on
	// purpose: "allow", "deny", or "auto" (allow unless TURNSTILE_AUTH=on, so a tenant cannot
	// fail its own turns at will). TURNSTILE_DEMO_FAULTS, default auto.
	DemoFaults string `env:"TURNSTILE_DEMO_FAULTS"`

	ShutdownTimeout time.Duration `env:"TURNSTILE_SHUTDOWN_TIMEOUT"`

	// Settings of one area each, in their own files, so they grow independently.
	Auth    AuthSettings
	Intake  IntakeSettings
	Worker  WorkerSettings
	Gateway GatewaySettings
	Agents  AgentSettings
	Ops     OpsSettings
	// LangGraph configures the langgraph role.
	LangGraph LangGraphSettings
	// FrontDoor is where the protocol front doors find the native API.
	FrontDoor FrontDoorSettings
	A2A       A2ASettings
	Notifier  NotifierSettings
	// Router configures the router role.
	Router RouterSettings
	// Region places the process in a multi-region deployment.
	Region RegionSettings
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
	str(&c.DemoFaults, DemoFaultsDefault)
	dur(&c.ShutdownTimeout, ShutdownTimeoutDefault)
	c.Auth.applyDefaults()
	c.Intake.applyDefaults()
	c.Worker.applyDefaults()
	c.Gateway.applyDefaults()
	c.Agents.applyDefaults()
	c.Ops.applyDefaults()
	c.A2A.applyDefaults()
	c.LangGraph.applyDefaults()
	c.Notifier.applyDefaults()
	c.Router.applyDefaults()
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
	checks := []struct {
		bad bool
		msg string
	}{
		{len(c.RoleList()) == 0, "TURNSTILE_ROLES: no role named"},
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
	}
	for _, ch := range checks {
		if ch.bad {
			errs = append(errs, errors.New(ch.msg))
		}
	}
	errs = append(errs, c.Auth.validate()...)
	errs = append(errs, c.Intake.validate()...)
	errs = append(errs, c.Worker.validate()...)
	errs = append(errs, c.Gateway.validate()...)
	errs = append(errs, c.Agents.validate()...)
	errs = append(errs, c.Ops.validate()...)
	errs = append(errs, c.LangGraph.validate()...)
	errs = append(errs, c.FrontDoor.validate()...)
	errs = append(errs, c.A2A.validate()...)
	errs = append(errs, c.Notifier.validate()...)
	errs = append(errs, c.Router.validate()...)
	errs = append(errs, c.Region.validate()...)
	return errors.Join(errs...)
}

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
