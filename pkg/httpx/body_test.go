package httpx

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLimitBody(t *testing.T) {
	t.Parallel()
	t.Run("DeclaredOverLimitReadsNothing", func(t *testing.T) {
		t.Parallel()
		body := &countingReader{r: strings.NewReader(strings.Repeat("a", 100))}
		r := httptest.NewRequest(http.MethodPost, "/", body)
		r.ContentLength = 100
		w := httptest.NewRecorder()
		_, err := io.ReadAll(LimitBody(w, r, 10))
		var tooBig *http.MaxBytesError
		require.True(t, errors.As(err, &tooBig), "%v", err)
		require.EqualValues(t, 10, tooBig.Limit)
		require.Zero(t, body.n, "not one byte read")
		require.Equal(t, "close", w.Header().Get("Connection"))
	})
	t.Run("UndeclaredCutAtLimit", func(t *testing.T) {
		t.Parallel()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("a", 100)))
		r.ContentLength = -1
		_, err := io.ReadAll(LimitBody(httptest.NewRecorder(), r, 10))
		var tooBig *http.MaxBytesError
		require.True(t, errors.As(err, &tooBig), "%v", err)
	})
	t.Run("WithinLimit", func(t *testing.T) {
		t.Parallel()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
		b, err := io.ReadAll(LimitBody(httptest.NewRecorder(), r, 10))
		require.NoError(t, err)
		require.Equal(t, "hello", string(b))
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
