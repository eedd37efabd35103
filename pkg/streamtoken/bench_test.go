package streamtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkSign measures issuing a stream token (intake signs one per accepted turn) and verifying
// one (the gateway, once per stream), beside the baseline of their work: one HMAC-SHA256 of a
// payload of the same size with a fresh HMAC.
func BenchmarkSign(b *testing.B) {
	s := New(Options{Keys: []Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, TTL: time.Hour})
	tok := s.Sign("tenant-a", "session-123")
	b.Run("HMACBaseline", func(b *testing.B) {
		payload := []byte(tok[:len(tok)-44])
		b.ReportAllocs()
		for b.Loop() {
			h := hmac.New(sha256.New, s.keys[0].Secret)
			h.Write(payload)
			_ = h.Sum(nil)
		}
	})
	b.Run("Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Sign("tenant-a", "session-123")
		}
	})
	b.Run("Verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Verify(tok, "session-123"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
