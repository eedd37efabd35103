package rpc

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
)

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body   string
		id           string // "" for none (a notification, or an id that could not be read)
		invalid      bool
		method       string
		notification bool
	}{
		{name: "Request", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}`, id: "7", method: "tasks/get"},
		{name: "NullID", body: `{"jsonrpc":"2.0","id":null,"method":"tasks/get"}`, id: "null", method: "tasks/get"},
		{name: "Notification", body: `{"jsonrpc":"2.0","method":"tasks/get"}`, method: "tasks/get", notification: true},
		{name: "MethodNumber", body: `{"jsonrpc":"2.0","id":"a","method":1}`, id: `"a"`, invalid: true},
		{name: "MethodEmpty", body: `{"jsonrpc":"2.0","id":1,"method":""}`, id: "1", invalid: true},
		{name: "VersionNumber", body: `{"jsonrpc":2.0,"id":1,"method":"x"}`, id: "1", invalid: true},
		{name: "NoVersion", body: `{"id":1,"method":"x"}`, id: "1", invalid: true},
		{name: "ArrayID", body: `{"jsonrpc":"2.0","id":[1],"method":"x"}`, invalid: true},
		{name: "BoolID", body: `{"jsonrpc":"2.0","id":true,"method":"x"}`, invalid: true},
		{name: "DuplicateID", body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, invalid: true},
		{name: "DuplicateVersion", body: `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"x"}`, invalid: true},
		{name: "String", body: `"x"`, invalid: true},
		{name: "Number", body: `1`, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := parseEnvelope(json.RawMessage(tc.body))
			if tc.invalid {
				require.ErrorIs(t, err, a2a.ErrInvalidRequest)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.method, e.Method)
				require.Equal(t, tc.notification, e.notification())
			}
			require.Equal(t, tc.id, string(e.ID))
		})
	}
}

func TestDuplicateMember(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"a":1,"b":{"a":2}}`:                           "",
		`{"a":1,"a":2}`:                                 "a",
		`{"m":{"parts":[{"k":"t"},{"k":"t"}]}}`:         "",
		`{"m":{"parts":[{"k":"t","k":"u"}]}}`:           "k",
		`{"x":["a","a"],"y":"y","z":{"y":1,"y":2}}`:     "y",
		`{"s":"a","t":{"u":[1,{"v":{}}]},"w":[],"s":1}`: "s",
		`[]`: "",
	} {
		require.Equal(t, want, duplicateMember(json.RawMessage(body)), body)
	}
}
