package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// EnvelopeVersion is the version intake writes. Workers accept every version up to this one.
const EnvelopeVersion = 1

// Input is what the user said in a turn.
type Input struct {
	Text string `json:"text"`
}

// Output is what the agent answered.
type Output struct {
	Text string `json:"text"`
}

// Envelope is the Kafka record value of topic "turns". The record key is the session ID, so every
// turn of a session lands on one partition in the order intake accepted it.
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
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("decode envelope: %w", err)
	}
	switch {
	case e.Version < 1 || e.Version > EnvelopeVersion:
		return Envelope{}, fmt.Errorf("%w: %d", ErrUnsupportedVersion, e.Version)
	case e.TurnID == uuid.Nil:
		return Envelope{}, errors.New("decode envelope: missing turn_id")
	case e.SessionID == "":
		return Envelope{}, errors.New("decode envelope: missing session_id")
	case e.Deadline.IsZero():
		return Envelope{}, errors.New("decode envelope: missing deadline")
	}
	return e, nil
}
