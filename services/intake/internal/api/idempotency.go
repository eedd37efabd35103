package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// idempotencyNamespace derives turn IDs from idempotency keys (UUIDv5), so every retry of a request
// maps to the same turn without a round trip to any store.
var idempotencyNamespace = uuid.MustParse("6f0c6c1e-2a8e-5b8e-9d38-6b7c1d0a7f41")

// idempotency records the body's hash under the turn's key (SET NX GET) and reports whether the key
// was used before with a different body; for a repeat of the same body it returns the stream token
// recorded by the first request, so every retry gets identical bytes. Without a key, or when Redis
// does not answer, it records nothing and admits.
func (h *Handler) idempotency(ctx context.Context, key, keyID, tenant, sessionID string, body []byte) (token string, reused bool) {
	if key == "" {
		return "", false
	}
	if h.idem == nil {
		h.failOpen.WithLabelValues("idempotency").Inc()
		return "", false
	}
	sum := sha256.New()
	sum.Write([]byte(sessionID))
	sum.Write([]byte{0})
	sum.Write(body)
	hash := hex.EncodeToString(sum.Sum(nil))
	token = h.d.Signer.SignKey(keyID, tenant, sessionID)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RedisTimeout)
	defer cancel()
	prev, err := h.idem.SetArgs(ctx, key, hash+" "+token, redis.SetArgs{Mode: "NX", Get: true, TTL: h.cfg.IdempotencyTTL}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return token, false // first use
	case err != nil:
		h.failOpen.WithLabelValues("idempotency").Inc()
		return token, false
	}
	prevHash, prevToken, _ := strings.Cut(prev, " ")
	if prevHash != hash {
		return "", true
	}
	if _, err := h.d.Signer.Verify(prevToken, sessionID); err != nil {
		return token, false // the recorded token expired (or its key was rotated out): a fresh one
	}
	return prevToken, false
}
