package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// TestValidation sends bad inputs and checks each gets its exact status and problem type, and that
// nothing reaches Kafka.
func TestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.MaxBody = 4096 }})
	base := b.srv.URL
	past := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	good := `{"input":{"text":"hi"}}`
	cases := []struct {
		name    string
		session string
		body    string
		header  map[string]string
		status  int
		problem string
	}{
		{"MalformedJSON", "s1", `{"input":`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"NotAnObject", "s1", `[1,2]`, nil, 422, httpx.ProblemValidation.Name},
		{"TrailingData", "s1", good + `{}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"UnknownField", "s1", `{"input":{"text":"hi"},"colour":"red"}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"WrongTypeText", "s1", `{"input":{"text":42}}`, nil, 422, httpx.ProblemValidation.Name},
		{"WrongTypeMetadata", "s1", `{"input":{"text":"hi"},"metadata":"x"}`, nil, 422, httpx.ProblemValidation.Name},
		{"WrongTypeDeadline", "s1", `{"input":{"text":"hi"},"deadline":"soon"}`, nil, 422, httpx.ProblemValidation.Name},
		{"MissingInput", "s1", `{}`, nil, 422, httpx.ProblemValidation.Name},
		{"EmptyText", "s1", `{"input":{"text":"  "}}`, nil, 422, httpx.ProblemValidation.Name},
		{"UnknownStrategy", "s1", `{"input":{"text":"hi"},"multitask":"shout"}`, nil, 422, httpx.ProblemValidation.Name},
		{"PriorityAboveRange", "s1", `{"input":{"text":"hi"},"priority":10}`, nil, 422, httpx.ProblemValidation.Name},
		{"PriorityBelowRange", "s1", `{"input":{"text":"hi"},"priority":-1}`, nil, 422, httpx.ProblemValidation.Name},
		{"NULInText", "s1", `{"input":{"text":"a\u0000b"}}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"NULInMetadataValue", "s1", `{"input":{"text":"hi"},"metadata":{"k":"a\u0000"}}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"NULInMetadataKey", "s1", `{"input":{"text":"hi"},"metadata":{"\u0000k":1}}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"NULDeepInMetadata", "s1", `{"input":{"text":"hi"},"metadata":{"a":[{"b":["x","\u0000"]}]}}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"MetadataTooDeep", "s1", `{"input":{"text":"hi"},"metadata":{"a":` + strings.Repeat("[", MetadataMaxDepth) + strings.Repeat("]", MetadataMaxDepth) + `}}`, nil, 400, httpx.ProblemInvalidBody.Name},
		{"OversizedBody", "s1", `{"input":{"text":"` + strings.Repeat("a", 5000) + `"}}`, nil, 413, httpx.ProblemBodyTooLarge.Name},
		{"WrongContentType", "s1", good, map[string]string{"Content-Type": "text/plain"}, 415, httpx.ProblemUnsupportedType.Name},
		{"XMLContentType", "s1", good, map[string]string{"Content-Type": "application/xml"}, 415, httpx.ProblemUnsupportedType.Name},
		{"FormBodyNotJSON", "s1", `input=hi`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 400, httpx.ProblemInvalidBody.Name},
		{"BadSessionChars", "bad%20session", good, nil, 400, httpx.ProblemInvalidSession.Name},
		{"SessionTooLong", strings.Repeat("s", 129), good, nil, 400, httpx.ProblemInvalidSession.Name},
		{"PastDeadlineHeader", "s1", good, map[string]string{"X-Deadline-Epoch-Ms": past}, 400, httpx.ProblemInvalidDeadline.Name},
		{"MalformedDeadlineHeader", "s1", good, map[string]string{"X-Deadline-Epoch-Ms": "tomorrow"}, 400, httpx.ProblemInvalidDeadline.Name},
		{"PastDeadlineBody", "s1", `{"input":{"text":"hi"},"deadline":` + past + `}`, nil, 400, httpx.ProblemInvalidDeadline.Name},
		{"NegativeDeadlineBody", "s1", `{"input":{"text":"hi"},"deadline":-5}`, nil, 400, httpx.ProblemInvalidDeadline.Name},
		{"BadTurnID", "s1", `{"input":{"text":"hi"},"turn_id":"nope"}`, nil, 400, httpx.ProblemInvalidTurnID.Name},
		{"LongIdempotencyKey", "s1", good, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, 400, httpx.ProblemInvalidTurnID.Name},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, base, request{
				Method: http.MethodPost, Path: "/v1/sessions/" + tc.session + "/turns",
				Body: tc.body, Header: tc.header, Unvalidated: true,
			})
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
			require.Equal(t, tc.problem, resp.ProblemType(t))
		})
	}
	require.Zero(t, b.recordsInKafka(t), "a refused request must produce nothing")

	// The same kinds of request, well formed, are accepted: the table fails for the reason it names.
	t.Run("Control", func(t *testing.T) {
		for _, h := range []map[string]string{nil, {"Content-Type": "application/x-www-form-urlencoded"}, {"Content-Type": "application/merge+json"}} {
			resp := do(t, base, request{Method: http.MethodPost, Path: "/v1/sessions/s1/turns", Body: good, Header: h, Unvalidated: h != nil})
			require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		}
		// Other escapes are storable, and metadata exactly MetadataMaxDepth deep is accepted.
		deepest := `{"input":{"text":"a\u0001b"},"metadata":{"k":"\u0001","a":` +
			strings.Repeat("[", MetadataMaxDepth-1) + strings.Repeat("]", MetadataMaxDepth-1) + `}}`
		resp := do(t, base, request{Method: http.MethodPost, Path: "/v1/sessions/s1/turns", Body: deepest})
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		require.EqualValues(t, 4, b.recordsInKafka(t))
	})
}

// TestDeadlines checks where a turn's deadline comes from: the header wins over the body, and the
// default applies without either.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	inHour := time.Now().Add(time.Hour).UnixMilli()
	inTwo := time.Now().Add(2 * time.Hour).UnixMilli()
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "d", `{"input":{"text":"a"}}`, nil).Status)
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "d", `{"input":{"text":"b"},"deadline":`+strconv.FormatInt(inHour, 10)+`}`, nil).Status)
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "d", `{"input":{"text":"c"},"deadline":`+strconv.FormatInt(inHour, 10)+`}`,
		map[string]string{"X-Deadline-Epoch-Ms": strconv.FormatInt(inTwo, 10)}).Status)
	recs := b.turnRecords(t, 3)
	got := map[string]time.Time{}
	for _, r := range recs {
		env := decodeEnvelope(t, r.Value)
		got[env.Input.Text] = env.Deadline
	}
	require.WithinDuration(t, time.Now().Add(b.env.Config.DefaultDeadline), got["a"], time.Minute)
	require.Equal(t, inHour, got["b"].UnixMilli())
	require.Equal(t, inTwo, got["c"].UnixMilli())
}
