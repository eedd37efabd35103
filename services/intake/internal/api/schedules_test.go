package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/schedule"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.SchedulesMax = 2 }})
	base := b.srv.URL

	var s wire.Schedule
	t.Run("Create", func(t *testing.T) {
		r := do(t, base, request{Method: http.MethodPost, Path: "/v1/schedules", Body: `{"schedule":"*/5 * * * * *","session_id":"daily-1",
			"turn":{"input":{"text":"report"}},"metadata":{"team":"ops"}}`})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		r.JSON(t, &s)
		require.Equal(t, "/v1/schedules/"+s.ScheduleID, r.Header.Get("Location"))
		require.Equal(t, "UTC", s.Timezone)
		require.NotNil(t, s.NextFireAt)
		require.Zero(t, s.NextFireAt.Second()%5)
	})
	t.Run("Refusals", func(t *testing.T) {
		for body, want := range map[string]string{
			`{"schedule":"* * *","turn":{"input":{"text":"x"}}}`:                         "validation-failed",
			`{"schedule":"@daily","timezone":"Mars/Base","turn":{"input":{"text":"x"}}}`: "validation-failed",
			`{"schedule":"@daily"}`: "validation-failed",
			`{"schedule":"@daily","turn":{"input":{"text":"x"},"deadline":1}}`:                       "validation-failed",
			`{"schedule":"@daily","turn":{"input":{"text":"x"},"metadata":{"schedule":1}}}`:          "validation-failed",
			`{"schedule":"@daily","turn":{"input":{}}}`:                                              "validation-failed",
			`{"schedule":"@daily","turn":{"input":{"text":"x"}},"extra":1}`:                          "invalid-body",
			`{"schedule":"@daily","turn":{"input":{"text":"` + strings.Repeat("x", 300<<10) + `"}}}`: "body-too-large",
		} {
			r := do(t, base, request{Method: http.MethodPost, Path: "/v1/schedules", Body: body, Unvalidated: true})
			require.Equal(t, want, r.ProblemType(t), body[:min(len(body), 80)])
		}
	})
	t.Run("ListGetUpdate", func(t *testing.T) {
		r := do(t, base, request{Method: http.MethodGet, Path: `/v1/schedules?metadata={"team":"ops"}&limit=5`})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var page wire.SchedulePage
		r.JSON(t, &page)
		require.Equal(t, 1, page.Total)
		require.Equal(t, s.ScheduleID, page.Schedules[0].ScheduleID)
		r = do(t, base, request{Method: http.MethodPatch, Path: "/v1/schedules/" + s.ScheduleID, Body: `{"enabled":false}`})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var got wire.Schedule
		r.JSON(t, &got)
		require.False(t, got.Enabled)
		require.Nil(t, got.NextFireAt)
		r = do(t, base, request{Method: http.MethodGet, Path: "/v1/schedules/" + s.ScheduleID})
		require.Equal(t, http.StatusOK, r.Status)
	})
	t.Run("Limit", func(t *testing.T) {
		body := `{"schedule":"@daily","turn":{"input":{"text":"x"}}}`
		require.Equal(t, http.StatusCreated, do(t, base, request{Method: http.MethodPost, Path: "/v1/schedules", Body: body}).Status)
		r := do(t, base, request{Method: http.MethodPost, Path: "/v1/schedules", Body: body})
		require.Equal(t, "schedules-limit", r.ProblemType(t))
	})
	t.Run("PostScheduledIsIdempotent", func(t *testing.T) {
		ctx := context.Background()
		tick := time.Now().Truncate(time.Second)
		body, err := schedule.FireBody(schedule.Fire{ScheduleID: s.ScheduleID, Tick: tick, Turn: []byte(`{"input":{"text":"report"}}`)})
		require.NoError(t, err)
		key := schedule.IdempotencyKey(s.ScheduleID, tick)
		one, out, detail := b.h.PostScheduled(ctx, wire.DefaultTenant, "daily-1", key, body)
		require.Equal(t, schedule.Posted, out, detail)
		two, out, detail := b.h.PostScheduled(ctx, wire.DefaultTenant, "daily-1", key, body)
		require.Equal(t, schedule.Posted, out, detail)
		require.Equal(t, one, two, "a tick posted again is the same turn")
		_, out, _ = b.h.PostScheduled(ctx, wire.DefaultTenant, "bad id!", key, body)
		require.Equal(t, schedule.Refused, out)
	})
	t.Run("DeleteThenNotFound", func(t *testing.T) {
		r := do(t, base, request{Method: http.MethodDelete, Path: "/v1/schedules/" + s.ScheduleID})
		require.Equal(t, http.StatusNoContent, r.Status)
		r = do(t, base, request{Method: http.MethodGet, Path: "/v1/schedules/" + s.ScheduleID})
		require.Equal(t, "schedule-not-found", r.ProblemType(t))
	})
}
