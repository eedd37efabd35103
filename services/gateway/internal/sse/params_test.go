package sse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
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

			got, bad := parseOpen(r, region.Local{})
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

// TestParseOpenRegion: in region euw1, ?turn_id= takes the bare or the prefixed form and follows
// the prefixed one the events carry; another region's turn or session is a 421 naming it.
func TestParseOpenRegion(t *testing.T) {
	t.Parallel()
	const turn = "0192f0c4-5d3c-7b7e-8a6f-1c2d3e4f5a6b"
	m, err := region.Parse([]byte(`{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}]}`))
	require.NoError(t, err)
	place := region.Local{Code: "euw1", Map: m}
	open := func(session, query string) (openRequest, *httpx.Problem) {
		r := httptest.NewRequest(http.MethodGet, "/v1/sessions/x/events?"+query, nil)
		rc := chi.NewRouteContext()
		rc.URLParams.Add(httpx.SessionIDParam, session)
		r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))
		return parseOpen(r, place)
	}
	for _, q := range []string{"turn_id=" + turn, "turn_id=euw1-" + turn} {
		got, bad := open("s1", q)
		require.Nil(t, bad)
		require.Nil(t, got.Invalid)
		require.Equal(t, "euw1-"+turn, got.TurnID, q)
	}
	got, bad := open("s1", "turn_id=euw1-x")
	require.Nil(t, bad)
	require.NotNil(t, got.Invalid)
	require.Equal(t, httpx.ProblemInvalidTurnID.Name, got.Invalid.Type)

	for _, tc := range []struct{ session, query string }{{"s1", "turn_id=use1-" + turn}, {"use1-chat", ""}} {
		_, bad := open(tc.session, tc.query)
		require.NotNil(t, bad, tc)
		require.Equal(t, httpx.ProblemMisdirected.Name, bad.Type)
		require.Equal(t, http.StatusMisdirectedRequest, bad.Status)
		require.Equal(t, "use1", bad.Extra[region.MemberRegion])
	}
	_, bad = open("user-42", "")
	require.Nil(t, bad, "a client's session that looks prefixed is ordinary")
}
