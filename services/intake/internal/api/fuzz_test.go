package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// FuzzParseTurn feeds arbitrary bodies to the strict parser. It must never panic, must refuse with
// exactly 400 or 422 and a known problem type, and whatever it accepts must be a valid turn that
// survives a round trip through JSON. The seed corpus in testdata/fuzz/FuzzParseTurn runs as part
// of `go test`; `go test -fuzz FuzzParseTurn ./internal/api` explores further.
func FuzzParseTurn(f *testing.F) {
	for _, s := range []string{
		`{"input":{"text":"hi"}}`,
		`{"input":{"text":"hi"},"metadata":{"demo":{"tokens":3}},"multitask":"interrupt","deadline":4102444800000}`,
		`{"input":{"text":"hi"},"turn_id":"0192f0c4-5d3c-7b7e-8a6f-1c2d3e4f5a6b"}`,
		`{"input":{"text":"hi"}} {}`, `{"input":null}`, `{"input":{"text":""}}`, `[]`, `null`, `"x"`, ``, `{`,
		`{"input":{"text":"hi","extra":1}}`, `{"multitask":"shout","input":{"text":"x"}}`, `{"input":{"text":"\ud800"}}`,
		`{"input":{"text":"a\u0000"}}`, `{"input":{"text":"hi"},"metadata":{"k":["\u0000"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, pe := parseTurn(body)
		if pe != nil {
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, pe.Status)
			require.Contains(t, []string{httpx.ProblemInvalidBody.Name, httpx.ProblemValidation.Name}, pe.Type)
			require.NotEmpty(t, pe.Detail)
			return
		}
		require.NotNil(t, req.Input)
		require.Empty(t, unstorable(req), "an accepted turn must be storable")
		require.NotEmpty(t, req.Input.Text)
		require.Contains(t, []string{"", "enqueue", "reject", "interrupt"}, req.Multitask)
		require.True(t, json.Valid(body))
		again, err := json.Marshal(req)
		require.NoError(t, err)
		req2, pe2 := parseTurn(again)
		require.Nil(t, pe2, "re-encoded accepted request must parse: %s", again)
		if utf8.ValidString(req.Input.Text) {
			require.Equal(t, req.Input.Text, req2.Input.Text)
		}
	})
}
