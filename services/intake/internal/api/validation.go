package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// postTurnRequest is the body of POST /v1/sessions/{session_id}/turns.
type postTurnRequest struct {
	Input     *wire.Input     `json:"input"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Multitask string          `json:"multitask,omitempty"`
	TurnID    string          `json:"turn_id,omitempty"`
	Deadline  *int64          `json:"deadline,omitempty"`
	Webhook   *webhookRequest `json:"webhook,omitempty"`
	// PushConfigs are push-notification configs of the turn's task (the A2A front door's
	// configuration.pushNotificationConfig): stored with the task from the turn's first write on.
	PushConfigs []pushConfigRequest `json:"push_configs,omitempty"`
	// Agent names the agent of the catalog the turn goes to; empty for the default agent.
	Agent string `json:"agent,omitempty"`
	// Priority orders the turn among its tenant's ready turns (wire.PriorityMin to PriorityMax,
	// higher first); absent is wire.PriorityDefault.
	Priority *int `json:"priority,omitempty"`
}

// maxDeadlineMs is the latest deadline accepted, 9999-12-31 in milliseconds since the epoch.
const maxDeadlineMs = 253402300799999

// acceptableContentType allows JSON media types and no header at all. It also allows
// application/x-www-form-urlencoded, which `curl -d` sends by default, because the body is parsed as
// strict JSON either way: a real form body fails that parse with a 400. Everything else is a 415.
func acceptableContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "application/x-www-form-urlencoded" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// readTurn reads the body and parses it strictly; it returns the raw bytes for the idempotency hash.
func readTurn(body io.Reader) ([]byte, postTurnRequest, *httpx.Problem) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, postTurnRequest{}, problem(httpx.ProblemBodyTooLarge, fmt.Sprintf("the body exceeds %d bytes", tooBig.Limit))
		}
		return nil, postTurnRequest{}, problem(httpx.ProblemInvalidBody, "the body could not be read")
	}
	req, p := parseTurn(raw)
	return raw, req, p
}

// parseTurn parses a body strictly: one JSON object, no unknown fields, input.text present, a known
// multitask strategy, and nothing Postgres cannot store (unstorable).
func parseTurn(raw []byte) (postTurnRequest, *httpx.Problem) {
	var req postTurnRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return req, problem(httpx.ProblemValidation, fmt.Sprintf("field %q has the wrong type", typeErr.Field))
		}
		return req, problem(httpx.ProblemInvalidBody, "malformed JSON: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, problem(httpx.ProblemInvalidBody, "the body must hold exactly one JSON object")
	}
	switch {
	case req.Input == nil:
		return req, problem(httpx.ProblemValidation, "input is required")
	case strings.TrimSpace(req.Input.Text) == "":
		return req, problem(httpx.ProblemValidation, "input.text is required")
	}
	if req.Priority != nil && !wire.PriorityValid(*req.Priority) {
		return req, problem(httpx.ProblemValidation, fmt.Sprintf("priority %d is not between %d and %d", *req.Priority, wire.PriorityMin, wire.PriorityMax))
	}
	switch req.Multitask {
	case "", "enqueue", "reject", "interrupt":
	default:
		return req, problem(httpx.ProblemValidation, fmt.Sprintf("multitask %q is not one of enqueue, reject, interrupt", req.Multitask))
	}
	if why := unstorable(req); why != "" {
		return req, problem(httpx.ProblemInvalidBody, why)
	}
	return req, nil
}

func problem(t httpx.ProblemType, detail string) *httpx.Problem {
	p := t.Problem(detail)
	return &p
}

// deadline is the header X-Deadline-Epoch-Ms, else the body's deadline (epoch ms), else now plus
// the default. A malformed or past deadline is refused.
func (h *Handler) deadline(r *http.Request, req postTurnRequest, now time.Time, def time.Duration) (time.Time, error) {
	var ms int64
	switch v := r.Header.Get("X-Deadline-Epoch-Ms"); {
	case v != "":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return time.Time{}, errors.New("X-Deadline-Epoch-Ms must be a positive integer of milliseconds since the epoch")
		}
		ms = n
	case req.Deadline != nil:
		if *req.Deadline <= 0 {
			return time.Time{}, errors.New("deadline must be a positive integer of milliseconds since the epoch")
		}
		ms = *req.Deadline
	default:
		if def <= 0 {
			def = h.cfg.DefaultDeadline
		}
		return now.Add(def), nil
	}
	if ms > maxDeadlineMs {
		return time.Time{}, errors.New("the deadline is too far in the future")
	}
	d := time.UnixMilli(ms)
	if !d.After(now) {
		return time.Time{}, errors.New("the deadline has already passed")
	}
	return d, nil
}

// turnID is the ID the turn is stored under: for a client-minted turn_id, wire.ClientTurnKey of the
// tenant and it (the API shows the client's ID, the stores this one); else one derived from
// Idempotency-Key (UUIDv5 of tenant, session and key), else a fresh UUIDv7. The second result is
// the Redis key of the idempotency record, empty when the request has neither.
func (h *Handler) turnID(r *http.Request, req postTurnRequest, tenant, sessionID string) (uuid.UUID, string, error) {
	var id uuid.UUID
	switch key := r.Header.Get("Idempotency-Key"); {
	case req.TurnID != "":
		parsed, ok := h.parseTurnID(req.TurnID)
		if !ok {
			return uuid.Nil, "", errors.New(h.turnIDShape())
		}
		id = wire.ClientTurnKey(tenant, parsed)
	case key != "":
		if len(key) > IdempotencyKeyMaxLen {
			return uuid.Nil, "", fmt.Errorf("Idempotency-Key must be at most %d characters", IdempotencyKeyMaxLen)
		}
		id = uuid.NewSHA1(idempotencyNamespace, []byte(tenant+"\x00"+sessionID+"\x00"+key))
	default:
		v7, err := uuid.NewV7()
		return v7, "", err
	}
	return id, h.cfg.KeyPrefix + ":idem:{" + tenant + "}:" + id.String(), nil
}
