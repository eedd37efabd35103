package registry

import "time"

// States of a registration as the registry shows them.
const (
	// StateLive is a registration whose lease has not run out.
	StateLive = "live"
	// StateExpired is a registration whose lease ran out that the sweeper has not removed yet.
	StateExpired = "expired"
	// StateFrozen is an expired registration the mass-expiry guard kept: too large a share of the
	// agent's registrations expired at once, so the registry suspects itself rather than the
	// replicas. A renewal with its epoch makes it live again.
	StateFrozen = "frozen"
	// StateDeleted is a removed registration, as the change feed reports it (a tombstone).
	StateDeleted = "deleted"
)

// Registration is what a replica sends to register (POST /v1/agents/{name}/instances).
type Registration struct {
	// InstanceID names the replica across its registrations (a StatefulSet pod's name, say); a
	// registration of an ID another live registration holds is refused (409), of an ID whose
	// registration expired it takes over with the next epoch. Empty: the registry mints one.
	InstanceID string `json:"instance_id,omitempty"`
	// Endpoint is the replica's base URL (an A2A agent's, for the a2a adapter).
	Endpoint string `json:"endpoint"`
	// Zone is the failure zone the replica runs in.
	Zone string `json:"zone,omitempty"`
	// CardDigest is a digest of the agent card the replica serves ("sha256:<hex>"), so readers
	// notice a change of capabilities without fetching every card.
	CardDigest string `json:"card_digest,omitempty"`
}

// Lease is the registry's answer to a registration or a renewal.
type Lease struct {
	Agent      string `json:"agent"`
	InstanceID string `json:"instance_id"`
	Epoch      int64  `json:"epoch"`
	// LeaseSeconds is the lease's length: a renewal must arrive within it.
	LeaseSeconds float64 `json:"lease_seconds"`
	// ExpiresAt is when the lease runs out without a renewal.
	ExpiresAt time.Time `json:"expires_at"`
	// HeartbeatSeconds is the renewal interval the registry asks for (a third of the lease);
	// replicas jitter it.
	HeartbeatSeconds float64 `json:"heartbeat_seconds"`
}

// Instance is one registration as the registry shows it.
type Instance struct {
	InstanceID string `json:"instance_id"`
	Endpoint   string `json:"endpoint"`
	Zone       string `json:"zone"`
	CardDigest string `json:"card_digest"`
	Epoch      int64  `json:"epoch"`
	// State is live, expired, frozen, or, in a change feed only, deleted.
	State        string    `json:"state"`
	ExpiresAt    time.Time `json:"expires_at"`
	RenewedAt    time.Time `json:"renewed_at"`
	RegisteredAt time.Time `json:"registered_at"`
	// Revision is the registry revision of the registration's last change.
	Revision int64 `json:"revision"`
}

// InstanceList is GET /v1/agents/{name}/instances.
type InstanceList struct {
	Agent     string     `json:"agent"`
	Revision  int64      `json:"revision"`
	Instances []Instance `json:"instances"`
	// Counts are the instances per state (live, expired, frozen).
	Counts map[string]int `json:"counts"`
}

// Changes is GET /v1/agents/{name}/instances/changes?since=R: the registrations of the agent
// that changed after revision R, removals included (state deleted), up to Revision. Reset says
// the registry no longer holds the changes since R (its tombstones were purged), so Instances is
// the whole current set and a reader replaces its snapshot instead of applying a delta.
type Changes struct {
	Agent     string     `json:"agent"`
	Revision  int64      `json:"revision"`
	Reset     bool       `json:"reset"`
	Instances []Instance `json:"instances"`
}
