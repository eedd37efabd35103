package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

// TestA2APushConfigsBounded reproduces the run where one task accepted 150 push configs: with the
// default limit of config.PushConfigsMaxDefault per task, tasks/pushNotificationConfig/set beyond
// it is invalid params and stores nothing, the native PUT is a 409 push-configs-limit, many
// concurrent sets store exactly the limit, a config sent with a follow-up message to a full task
// is not stored, and get and list never show a config's token.
func TestA2APushConfigsBounded(t *testing.T) {
	s := startA2AStackWith(t, "intake,worker,gateway,a2a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := s.client(t, s.keyA, nil)
	const most = config.PushConfigsMaxDefault
	count := func(task a2a.TaskID) int {
		var n int
		require.NoError(t, s.env.Pool.QueryRow(ctx, `SELECT count(*) FROM task_push_configs WHERE task_id = $1`, string(task)).Scan(&n))
		return n
	}
	newTask := func(md map[string]any) *a2a.Task {
		return taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("bounded", md),
			Config:  &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
	}

	t.Run("SetBeyondTheLimit", func(t *testing.T) {
		task := newTask(map[string]any{"demo": map[string]any{"tokens": 1}})
		for i := range most {
			_, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{
				ID: fmt.Sprintf("c%d", i), URL: "https://example.com/hook", Token: "secret-token",
			}})
			require.NoError(t, err, "config %d", i)
		}
		_, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "one-more", URL: "https://example.com/hook"}})
		require.ErrorIs(t, err, a2a.ErrInvalidParams, "a config beyond the limit")
		require.Contains(t, err.Error(), fmt.Sprintf("at most %d push configs", most))
		require.Equal(t, most, count(task.ID), "the refused config stored nothing")
		// Replacing one of them is not a new config.
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "c0", URL: "https://example.com/other"}})
		require.NoError(t, err, "replacing a stored config at the limit")

		// The native route answers the same limit as a problem document.
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+"/v1/turns/"+string(task.ID)+"/push-configs/native-one",
			strings.NewReader(`{"url":"https://example.com/hook"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.keyA)
		req.Header.Set("Content-Type", "application/json")
		resp, err := apiClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", b)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Contains(t, string(b), `/push-configs-limit"`)
		require.Equal(t, most, count(task.ID))

		// Get and list never echo the token.
		got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "c1"})
		require.NoError(t, err)
		require.Empty(t, got.Config.Token, "get does not echo the token")
		all, err := c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, most)
		for _, pc := range all {
			require.Empty(t, pc.Config.Token, "list does not echo the token")
		}
		for _, path := range []string{"/push-configs", "/push-configs/c1"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/turns/"+string(task.ID)+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+s.keyA)
			resp, err := apiClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
			require.NotContains(t, string(b), "secret-token", "the native %s does not echo the token", path)
		}
	})

	t.Run("ConcurrentSets", func(t *testing.T) {
		task := newTask(map[string]any{"demo": map[string]any{"tokens": 1}})
		const tries = 40
		var wg sync.WaitGroup
		errs := make([]error, tries)
		for i := range tries {
			wg.Go(func() {
				_, errs[i] = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{
					ID: fmt.Sprintf("r%d", i), URL: "https://example.com/hook",
				}})
			})
		}
		wg.Wait()
		stored := 0
		for _, err := range errs {
			if err == nil {
				stored++
				continue
			}
			require.ErrorIs(t, err, a2a.ErrInvalidParams)
		}
		require.Equal(t, most, stored, "exactly the limit is accepted")
		require.Equal(t, most, count(task.ID), "exactly the limit is stored")
	})

	t.Run("FollowUpsWithConfigs", func(t *testing.T) {
		// Each follow-up of an input-required task carries a config of its own; the task keeps
		// at most the limit, however many follow-ups come.
		ask := map[string]any{"demo": map[string]any{"end_state": "input-required", "tokens": 1}}
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("ask", ask)}))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		for i := range most + 3 {
			follow := a2aMessage(fmt.Sprintf("follow-up %d", i), ask)
			follow.TaskID, follow.ContextID = task.ID, task.ContextID
			got, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: follow, Config: &a2a.MessageSendConfig{
				PushConfig: &a2a.PushConfig{URL: fmt.Sprintf("https://example.com/follow-%d", i)},
			}})
			require.NoError(t, err, "follow-up %d", i)
			b, _ := json.Marshal(got)
			require.Contains(t, string(b), `"input-required"`, "follow-up %d ran", i)
		}
		require.Equal(t, most, count(task.ID), "the configs of follow-ups past the limit are not stored")
	})
}
