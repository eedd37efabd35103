package wire

// Status is the lifecycle state of a turn as Postgres records it and the API reports it.
type Status string

// Turn statuses. queued and running are live; the rest are terminal.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
)

// Terminal reports whether the turn has ended.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// SessionIDRule is the rule a session ID follows, as error messages and the API's documentation
// state it. Session IDs are client-minted, so the first turn of a session already routes by it.
const SessionIDRule = "1-128 characters of [A-Za-z0-9._:-]"

// SessionIDMaxLen is the longest session ID.
const SessionIDMaxLen = 128

// SessionIDValid reports whether id follows SessionIDRule.
func SessionIDValid(id string) bool {
	if len(id) == 0 || len(id) > SessionIDMaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
