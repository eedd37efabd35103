package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	fastjson "github.com/segmentio/encoding/json"
)

// EnvelopeVersion is the version intake writes. Workers accept every version up to this one.
const EnvelopeVersion = 1

// Input is what the user said in a turn. The worker's statements store it built from Text alone
// (services/worker/internal/lease): a field added here must be added there, and
// TestInputAndOutputStoredAsEncoded fails until it is.
type Input struct {
	Text string `json:"text"`
}

// Output is what the agent answered. The worker's completion statement builds the stored object
// from Text, State and Usage (services/worker/internal/lease, pkg/turnstore's complete.sql): a
// field added here must be added there, and TestInputAndOutputStoredAsEncoded fails until it is.
type Output struct {
	Text string `json:"text"`
	// State is empty for an answer that ends the exchange, or OutputInputRequired or
	// OutputAuthRequired when the agent ended its turn waiting for the user: the turn succeeded,
	// and a protocol front door keeps its task open (A2A's input-required and auth-required)
	// until the next turn of the session answers it.
	State string `json:"state,omitempty"`
	// Usage is the tokens the agent's model spent on the attempt that answered, absent when the
	// agent did not report them.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage counts the tokens a model spent on a turn (Output.Usage).
type Usage struct {
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	TotalTokens  int64  `json:"total_tokens"`
	Model        string `json:"model,omitempty"`
}

// Output states (Output.State).
const (
	OutputInputRequired = "input-required"
	OutputAuthRequired  = "auth-required"
)

// OutputStateValid reports whether s is a state an Output may carry (the empty state included).
func OutputStateValid(s string) bool {
	return s == "" || s == OutputInputRequired || s == OutputAuthRequired
}

// Envelope is the Kafka record value of topic "turns". The record key is the session's key
// (SessionKey), so every turn of a session lands on one partition in the order intake accepted it.
// SessionID is the client's session ID; with Tenant it makes the key.
type Envelope struct {
	Version    int               `json:"v"`
	TurnID     uuid.UUID         `json:"turn_id"`
	SessionID  string            `json:"session_id"`
	Tenant     string            `json:"tenant"`
	Input      Input             `json:"input"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
	Multitask  string            `json:"multitask,omitempty"`
	Deadline   time.Time         `json:"deadline"`
	AcceptedAt time.Time         `json:"accepted_at"`
	Extra      map[string]string `json:"extra,omitempty"`
	// ClientTurnID is the turn ID the client minted, when it did: TurnID is then derived from it
	// and the tenant (see ClientTurnKey), and the events show the client's ID (ShownTurnID).
	ClientTurnID uuid.UUID `json:"client_turn_id,omitzero"`
	// Region is the code of the region that accepted the turn (TURNSTILE_REGION), empty in
	// single-region mode: the turn's ID as the client knows it carries it (ShownTurnID), while
	// TurnID and every store keep the bare UUID (pkg/region).
	Region string `json:"region,omitempty"`
	// Webhook is the turn's native webhook, nil for none: the worker's claim stores it in the
	// turn's own columns (pkg/turnstore), never in its metadata, and the notifier POSTs every
	// status the turn takes from its claim on to it.
	Webhook *Webhook `json:"webhook,omitempty"`
	// PushConfigs are the A2A push-notification configs sent with the turn, stored with the turn's
	// task by the first statement that writes the turn (pkg/turnstore); none for most turns.
	PushConfigs []PushConfig `json:"push_configs,omitempty"`
	// Agent names the agent the turn goes to (pkg/agents); empty in a record written before
	// agents had names, which is the default agent's.
	Agent string `json:"agent,omitempty"`
	// Priority orders the turn among its own tenant's ready turns (PriorityMin to PriorityMax,
	// higher first); nil is PriorityDefault. It never moves a turn ahead of another tenant's
	// share: the worker's fair scheduler picks the tenant first, then the tenant's turn.
	Priority *int `json:"priority,omitempty"`
}

// The range of a turn's priority (Envelope.Priority).
const (
	PriorityMin     = 0
	PriorityMax     = 9
	PriorityDefault = 5
)

// PriorityHeader is the Kafka record header that repeats a turn's priority as a decimal (absent
// for PriorityDefault), so the worker's scheduler orders records without decoding their values.
const PriorityHeader = "turnstile-priority"

// PriorityValid reports whether p is within PriorityMin to PriorityMax.
func PriorityValid(p int) bool { return p >= PriorityMin && p <= PriorityMax }

// PriorityOf is e's priority, PriorityDefault when it names none.
func (e *Envelope) PriorityOf() int {
	if e.Priority == nil {
		return PriorityDefault
	}
	return *e.Priority
}

// Webhook is a turn's native webhook: every status the turn takes is POSTed to URL, with Token in
// X-A2A-Notification-Token.
type Webhook struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
}

// PushConfig is one A2A push-notification config of a task: every status change of the task's
// turns is POSTed to URL as the A2A Task, with Token in X-A2A-Notification-Token and, when
// AuthSchemes names Bearer or Basic, "Authorization: <scheme> <AuthCredentials>".
type PushConfig struct {
	ID              string   `json:"id"`
	URL             string   `json:"url"`
	Token           string   `json:"token,omitempty"`
	AuthSchemes     []string `json:"auth_schemes,omitempty"`
	AuthCredentials string   `json:"auth_credentials,omitempty"`
	// A2AVersion is the A2A protocol version the config was created in and its notifications
	// are rendered in: "1.0", or "" (stored as "0.3").
	A2AVersion string `json:"a2a_version,omitempty"`
}

// The metadata keys a turn's webhook and push configs travelled under before the envelope had
// fields for them (migrations 00140 and 00150 read them in triggers). Intake writes the fields
// and no longer these keys, and refuses them in a client's metadata; DecodeEnvelope still reads
// them from a record written before (liftLegacyKeys), so a record of either format left in Kafka
// across an upgrade keeps its notifications, and no such key reaches a turn's stored metadata.
const (
	LegacyWebhookKey     = "turnstile.webhook"
	LegacyPushConfigsKey = "turnstile.push_configs"
)

// liftLegacyKeys moves the legacy keys out of e.Metadata into e.Webhook and e.PushConfigs (a
// field already set wins) and reports whether the metadata held any. It reads them as the
// triggers of migrations 00140 and 00150 did: a webhook is an object with a string url (else
// there is none); a push config is an object with string id and url, other elements are skipped;
// a key of another shape is dropped all the same.
func liftLegacyKeys(e *Envelope) bool {
	hook, hasHook := e.Metadata[LegacyWebhookKey]
	configs, hasConfigs := e.Metadata[LegacyPushConfigsKey]
	if !hasHook && !hasConfigs {
		return false
	}
	delete(e.Metadata, LegacyWebhookKey)
	delete(e.Metadata, LegacyPushConfigsKey)
	if m, ok := hook.(map[string]any); ok && e.Webhook == nil {
		if u, ok := m["url"].(string); ok {
			tok, _ := m["token"].(string)
			e.Webhook = &Webhook{URL: u, Token: tok}
		}
	}
	list, _ := configs.([]any)
	if e.PushConfigs != nil {
		list = nil
	}
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		id, okID := m["id"].(string)
		u, okURL := m["url"].(string)
		if !okID || !okURL {
			continue
		}
		pc := PushConfig{ID: id, URL: u}
		pc.Token, _ = m["token"].(string)
		pc.AuthCredentials, _ = m["auth_credentials"].(string)
		schemes, _ := m["auth_schemes"].([]any)
		for _, s := range schemes {
			if s, ok := s.(string); ok {
				pc.AuthSchemes = append(pc.AuthSchemes, s)
			}
		}
		e.PushConfigs = append(e.PushConfigs, pc)
	}
	return true
}

// envelopeRecord is Envelope as DecodeEnvelope reads it: its Metadata, shallower than the
// embedded Envelope's, takes the metadata raw (the shallower of two fields of one name is the one
// decoded, in encoding/json and segmentio/encoding alike).
type envelopeRecord struct {
	Envelope
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ErrUnsupportedVersion is returned by DecodeEnvelope for an envelope written by a newer intake.
var ErrUnsupportedVersion = errors.New("unsupported envelope version")

// Encode marshals the envelope, stamping the current version.
func (e *Envelope) Encode() ([]byte, error) {
	e.Version = EnvelopeVersion
	return json.Marshal(e)
}

// DecodeEnvelope parses a record value and checks the fields a worker cannot do without. A record
// that fails here can never succeed, so callers route it to the dead-letter topic instead of retrying.
// A record written with the legacy metadata keys (LegacyWebhookKey, LegacyPushConfigsKey) reads
// as one written with the fields: the keys are taken out of the metadata into them.
//
// It reads as encoding/json would (FuzzDecodeEnvelope holds it to that; BenchmarkDecodeEnvelope
// compares the two) in less time, because a worker decodes every record: the envelope's fixed
// fields go through segmentio/encoding, which is faster on them; the metadata, an arbitrary
// object, is kept raw there and decoded by encoding/json, which builds such values with less
// garbage.
func DecodeEnvelope(b []byte) (Envelope, error) {
	e, _, err := DecodeEnvelopeRaw(b)
	return e, err
}

// DecodeEnvelopeRaw is DecodeEnvelope that also returns the metadata as the record held it (nil
// when the envelope's Metadata is nil): a consumer that stores the metadata can store these bytes
// instead of encoding the map again. They may share b's memory, or, for a record with legacy
// keys, be the metadata encoded again without them.
func DecodeEnvelopeRaw(b []byte) (Envelope, json.RawMessage, error) {
	var r envelopeRecord
	if err := fastjson.Unmarshal(b, &r); err != nil {
		return Envelope{}, nil, fmt.Errorf("decode envelope: %w", err)
	}
	e := r.Envelope
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &e.Metadata); err != nil {
			return Envelope{}, nil, fmt.Errorf("decode envelope: metadata: %w", err)
		}
		if liftLegacyKeys(&e) {
			// Encoding a map just decoded from JSON cannot fail.
			r.Metadata, _ = json.Marshal(e.Metadata)
		}
	}
	switch {
	case e.Version < 1 || e.Version > EnvelopeVersion:
		return Envelope{}, nil, fmt.Errorf("%w: %d", ErrUnsupportedVersion, e.Version)
	case e.TurnID == uuid.Nil:
		return Envelope{}, nil, errors.New("decode envelope: missing turn_id")
	case e.SessionID == "":
		return Envelope{}, nil, errors.New("decode envelope: missing session_id")
	case e.Deadline.IsZero():
		return Envelope{}, nil, errors.New("decode envelope: missing deadline")
	}
	if e.Metadata == nil {
		return e, nil, nil
	}
	return e, r.Metadata, nil
}
