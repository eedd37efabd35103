package streams

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sk is the key of session s of the tests' tenant: the publisher and reader take keys, and the
// tests name sessions by their IDs.
func sk(s string) wire.SessionKey { return wire.NewSessionKey("t", s) }
