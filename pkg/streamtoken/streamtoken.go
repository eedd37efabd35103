package streamtoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors of Verify. ErrExpired and ErrScope are for a well-formed token the holder may not use;
// ErrInvalid is for anything else.
var (
	ErrInvalid = errors.New("invalid stream token")
	ErrExpired = errors.New("stream token expired")
	ErrScope   = errors.New("stream token is for another session")
)

// Claims are what a token grants.
type Claims struct {
	KeyID     string `json:"kid"`
	Tenant    string `json:"ten"`
	SessionID string `json:"sid"`
	Expires   int64  `json:"exp"`
	// APIKeyID names the API key the token was issued to, so that revoking the key ends the
	// token's streams (the gateway checks it against the revoked keys it knows). Empty when
	// intake runs without API keys.
	APIKeyID string `json:"akid,omitempty"`
}

// TTLDefault is how long a token is valid when Options name no TTL.
const TTLDefault = time.Hour

// Key is one signing key: tokens name it by ID, so several keys can verify during a rotation.
type Key struct {
	ID     string
	Secret []byte
}

// Options configure a Signer. Zero values mean defaults.
type Options struct {
	// Keys verify tokens, and Keys[0] signs new ones, so keys rotate by prepending a new one.
	// Defaults to one random key made for this signer (development, where one process issues and
	// verifies).
	Keys []Key
	// TTL is how long a token is valid after it is signed. Defaults to TTLDefault (1h).
	TTL time.Duration
}

// Signer signs and verifies tokens. Safe for concurrent use.
type Signer struct {
	keys []Key
	ttl  time.Duration
	now  func() time.Time
	// macs holds, per key (same index as keys), HMAC states to reuse: intake signs a token for
	// every accepted turn and the gateway verifies one per stream, and a fresh HMAC computes its
	// key schedule again each time.
	macs []*sync.Pool
}

// New returns a signer with o's keys and TTL, defaults filled.
func New(o Options) *Signer {
	keys := o.Keys
	if len(keys) == 0 {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		keys = []Key{{ID: "dev", Secret: secret}}
	}
	ttl := o.TTL
	if ttl == 0 {
		ttl = TTLDefault
	}
	s := &Signer{keys: keys, ttl: ttl, now: time.Now, macs: make([]*sync.Pool, len(keys))}
	for i, k := range keys {
		s.macs[i] = &sync.Pool{New: func() any { return hmac.New(sha256.New, k.Secret) }}
	}
	return s
}

// Sign issues a token for a tenant's session, naming no API key.
func (s *Signer) Sign(tenant, sessionID string) string { return s.SignKey("", tenant, sessionID) }

// SignKey issues a token for a tenant's session on behalf of the API key apiKeyID.
func (s *Signer) SignKey(apiKeyID, tenant, sessionID string) string {
	k := s.keys[0]
	// The claims' JSON, as json.Marshal of Claims writes it (the test checks), without reflection.
	body := make([]byte, 0, 96)
	body = append(body, `{"kid":`...)
	body = appendJSONString(body, k.ID)
	body = append(body, `,"ten":`...)
	body = appendJSONString(body, tenant)
	body = append(body, `,"sid":`...)
	body = appendJSONString(body, sessionID)
	body = append(body, `,"exp":`...)
	body = strconv.AppendInt(body, s.now().Add(s.ttl).Unix(), 10)
	if apiKeyID != "" {
		body = append(body, `,"akid":`...)
		body = appendJSONString(body, apiKeyID)
	}
	body = append(body, '}')
	payload := base64.RawURLEncoding.EncodeToString(body)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(0, payload))
}

// appendJSONString appends v as a JSON string: as it is when it needs no escaping (session IDs,
// tenants and key IDs in practice), else through encoding/json.
func appendJSONString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(v)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

// Verify checks a token's signature and expiry and that it grants sessionID; it returns its claims.
func (s *Signer) Verify(token, sessionID string) (Claims, error) {
	c, payload, sig, ok := parse(token)
	if !ok {
		return Claims{}, ErrInvalid
	}
	gotMAC, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	key := -1
	for i := range s.keys {
		if s.keys[i].ID == c.KeyID {
			key = i
			break
		}
	}
	if key < 0 || !hmac.Equal(gotMAC, s.mac(key, payload)) {
		return Claims{}, ErrInvalid
	}
	if s.now().Unix() >= c.Expires {
		return Claims{}, ErrExpired
	}
	if c.SessionID != sessionID {
		return Claims{}, ErrScope
	}
	return c, nil
}

// Unverified reads a token's claims without checking its signature or expiry: the claims are not
// secret (base64 JSON), and a router may place a request by its tenant without holding the keys.
// Never grant anything on them; Verify does that.
func Unverified(token string) (Claims, bool) {
	c, _, _, ok := parse(token)
	return c, ok
}

// parse splits a token into its claims, its signed payload and its signature.
func parse(token string) (c Claims, payload, sig string, ok bool) {
	payload, sig, ok = strings.Cut(token, ".")
	if !ok || len(token) > 2048 {
		return Claims{}, "", "", false
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, "", "", false
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return Claims{}, "", "", false
	}
	return c, payload, sig, true
}

// mac is HMAC-SHA256 of payload under the i-th key.
func (s *Signer) mac(i int, payload string) []byte {
	h := s.macs[i].Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(payload))
	sum := h.Sum(make([]byte, 0, sha256.Size))
	s.macs[i].Put(h)
	return sum
}
