package lease

import "strings"

// IsUnstorable reports whether a claim failed because Postgres refuses the record's own data (a
// data exception, an integrity violation, or a program limit such as jsonb nested past the stack
// depth), as opposed to the connection or the server failing. Claiming the same record again
// fails the same way; Storable gives the request that can be claimed instead.
func IsUnstorable(err error) bool {
	return isDataError(err)
}

// Storable returns req without what Postgres may refuse in a record's data: the input text with
// every NUL replaced by U+FFFD, and no metadata, webhook or push configs (a record written before
// the envelope had fields for them carried them in its metadata). A worker claims it in place of a request its
// store refused, so the turn still gets a row whose status, attempts and error say what became of
// it; the record itself, intact, goes to the dead-letter topic.
func Storable(req ClaimRequest) ClaimRequest {
	req.Env.Input.Text = strings.ReplaceAll(req.Env.Input.Text, "\x00", "\uFFFD")
	req.Env.Metadata, req.RawMetadata = nil, nil
	req.Env.Webhook, req.Env.PushConfigs = nil, nil
	return req
}
