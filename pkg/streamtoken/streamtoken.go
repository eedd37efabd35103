package streamtoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/config"
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
}

// Signer signs and verifies tokens.
type Signer struct {
	keys []config.SigningKey
	ttl  time.Duration
	now  func() time.Time
}

// New returns a signer; keys[0] signs. With no keys it makes one random key (for development,
// where one process issues and verifies).
func New(keys []config.SigningKey, ttl time.Duration) *Signer {
	if len(keys) == 0 {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		keys = []config.SigningKey{{ID: "dev", Secret: secret}}
	}
	return &Signer{keys: keys, ttl: ttl, now: time.Now}
}

// Sign issues a token for a tenant's session.
func (s *Signer) Sign(tenant, sessionID string) string {
	k := s.keys[0]
	c := Claims{KeyID: k.ID, Tenant: tenant, SessionID: sessionID, Expires: s.now().Add(s.ttl).Unix()}
	body, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(body)
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(k.Secret, payload))
}

// Verify checks a token's signature and expiry and that it grants sessionID; it returns its claims.
func (s *Signer) Verify(token, sessionID string) (Claims, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 2048 {
		return Claims{}, ErrInvalid
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	gotMAC, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil {
		return Claims{}, ErrInvalid
	}
	var key *config.SigningKey
	for i := range s.keys {
		if s.keys[i].ID == c.KeyID {
			key = &s.keys[i]
			break
		}
	}
	if key == nil || !hmac.Equal(gotMAC, mac(key.Secret, payload)) {
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

func mac(secret []byte, payload string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(payload))
	return h.Sum(nil)
}
