package sse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/streams"
)

func TestParseOpen(t *testing.T) {
	t.Parallel()
	const turn = "0192f0c4-5d3c-7b7e-8a6f-1c2d3e4f5a6b"
	cursor, err := streams.ParseCursor("k3f9:1732881234567-0")
	require.NoError(t, err)
	later, err := streams.ParseCursor("k3f9:1732881234999-2")
	require.NoError(t, err)

	cases := []struct {
		name    string
		session string
		query   string
		header  map[string]string
		want    openRequest
		bad     string // the problem answered before the token check
		invalid string // the problem answered after it
	}{
		{name: "Bare", session: "s1", want: openRequest{SessionID: "s1"}},
		{name: "BadSession", session: "a b", bad: httpx.ProblemInvalidSession.Name},
		{
			name: "HeaderCursor", session: "s1", header: map[string]string{"Last-Event-ID": "k3f9:1732881234567-0"},
			want: openRequest{SessionID: "s1", Cursor: "k3f9:1732881234567-0", CursorSource: "header", After: &cursor},
		},
		{
			name: "QueryCursor", session: "s1", query: "last_event_id=k3f9:1732881234567-0",
			want: openRequest{SessionID: "s1", Cursor: "k3f9:1732881234567-0", CursorSource: "query", After: &cursor},
		},
		{
			name: "HeaderWinsOverStaleQuery", session: "s1", query: "last_event_id=k3f9:1732881234567-0",
			header: map[string]string{"Last-Event-ID": "k3f9:1732881234999-2"},
			want:   openRequest{SessionID: "s1", Cursor: "k3f9:1732881234999-2", CursorSource: "header", After: &later},
		},
		{
			name: "LiveOnly", session: "s1", query: "last_event_id=$",
			want: openRequest{SessionID: "s1", Cursor: "$", CursorSource: "query", Live: true},
		},
		{
			name: "BadCursor", session: "s1", header: map[string]string{"Last-Event-ID": "nope"},
			want: openRequest{SessionID: "s1", Cursor: "nope", CursorSource: "header"}, invalid: httpx.ProblemInvalidCursor.Name,
		},
		{
			name: "TurnFilter", session: "s1", query: "turn_id=" + turn,
			want: openRequest{SessionID: "s1", TurnID: turn},
		},
		{
			name: "BadTurnID", session: "s1", query: "turn_id=x",
			want: openRequest{SessionID: "s1", TurnID: "x"}, invalid: httpx.ProblemInvalidTurnID.Name,
		},
		{
			name: "BadTurnIDBeforeBadCursor", session: "s1", query: "turn_id=x&last_event_id=nope",
			want: openRequest{SessionID: "s1", TurnID: "x", Cursor: "nope", CursorSource: "query"}, invalid: httpx.ProblemInvalidTurnID.Name,
		},
		{
			name: "BearerToken", session: "s1", header: map[string]string{"Authorization": "Bearer  tok "},
			want: openRequest{SessionID: "s1", Token: "tok"},
		},
		{
			name: "BearerCaseInsensitive", session: "s1", header: map[string]string{"Authorization": "bearer tok"},
			want: openRequest{SessionID: "s1", Token: "tok"},
		},
		{
			name: "QueryToken", session: "s1", query: "access_token=qtok",
			want: openRequest{SessionID: "s1", Token: "qtok"},
		},
		{
			name: "HeaderTokenWinsOverQuery", session: "s1", query: "access_token=qtok",
			header: map[string]string{"Authorization": "Bearer htok"}, want: openRequest{SessionID: "s1", Token: "htok"},
		},
		{
			name: "OtherSchemeFallsBackToQuery", session: "s1", query: "access_token=qtok",
			header: map[string]string{"Authorization": "Basic dTpw"}, want: openRequest{SessionID: "s1", Token: "qtok"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/v1/sessions/x/events?"+tc.query, nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			rc := chi.NewRouteContext()
			rc.URLParams.Add(httpx.SessionIDParam, tc.session)
			r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))

			got, bad := parseOpen(r)
			if tc.bad != "" {
				require.NotNil(t, bad)
				require.Equal(t, tc.bad, bad.Type)
				return
			}
			require.Nil(t, bad)
			if tc.invalid != "" {
				require.NotNil(t, got.Invalid)
				require.Equal(t, tc.invalid, got.Invalid.Type)
				require.Equal(t, http.StatusBadRequest, got.Invalid.Status)
				got.Invalid = nil
			} else {
				require.Nil(t, got.Invalid)
			}
			require.Equal(t, tc.want, got)
		})
	}
}
