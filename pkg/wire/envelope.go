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
// from Text and State (services/worker/internal/lease, pkg/turnstore's complete.sql): a field
// added here must be added there, and TestInputAndOutputStoredAsEncoded fails until it is.
type Output struct {
	Text string `json:"text"`
	// State is empty for an answer that ends the exchange, or OutputInputRequired or
	// OutputAuthRequired when the agent ended its turn waiting for the user: the turn succeeded,
	// and a protocol front door keeps its task open (A2A's input-required and auth-required)
	// until the next turn of the session answers it.
	State string `json:"state,omitempty"`
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
// instead of encoding the map again. They may share b's memory.
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
