package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/a2atask"
)

// Bounds of ListTasks' pageSize (protocol 1.0: at most 100, 50 when unset).
const (
	ListPageDefault = 50
	ListPageMax     = 100
)

// ListQuery is protocol 1.0's ListTasks request.
type ListQuery struct {
	// ContextID names the context (turnstile session) whose tasks are listed; required, as a
	// task lives in its session and the native API lists a session's turns.
	ContextID string
	// State, when set, keeps only tasks in that state.
	State a2a.TaskState
	// PageSize bounds how many of the context's turns one page reads (1–100, default 50): a page
	// holds at most that many tasks, fewer when some turns are follow-ups or filtered out.
	PageSize int
	// PageToken is the NextPageToken of an earlier page.
	PageToken string
	// HistoryLength trims each task's history to its newest messages.
	HistoryLength *int
	// StatusAfter, when set, keeps only tasks whose status changed after it.
	StatusAfter *time.Time
	// IncludeArtifacts keeps the tasks' artifacts (left out by default, as 1.0 says).
	IncludeArtifacts bool
}

// ListPage is one page of ListTasks, newest task first.
type ListPage struct {
	Tasks         []*a2a.Task
	NextPageToken string
	PageSize      int
}

// ListTasks answers protocol 1.0's ListTasks over the native API's session turn listing.
func (h *Handler) ListTasks(ctx context.Context, q ListQuery) (*ListPage, error) {
	call := callFrom(ctx)
	switch {
	case q.ContextID == "":
		return nil, call.fail(fmt.Errorf("contextId is required: this agent lists the tasks of one context: %w", a2a.ErrInvalidParams))
	case q.PageSize < 0 || q.PageSize > ListPageMax:
		return nil, call.fail(fmt.Errorf("pageSize must be between 1 and %d: %w", ListPageMax, a2a.ErrInvalidParams))
	case q.HistoryLength != nil && *q.HistoryLength < 0:
		return nil, call.fail(fmt.Errorf("historyLength must not be negative: %w", a2a.ErrInvalidParams))
	}
	if q.PageSize == 0 {
		q.PageSize = ListPageDefault
	}
	page, err := h.fd.ListTurns(ctx, call.Credential, q.ContextID, q.PageSize, q.PageToken)
	if err != nil {
		return nil, call.native(err, fmt.Errorf("context %s: %w", q.ContextID, a2a.ErrInvalidParams))
	}
	out := &ListPage{NextPageToken: page.NextCursor, PageSize: q.PageSize, Tasks: []*a2a.Task{}}
	for _, t := range page.Turns {
		if a2atask.LinkOf(t).TaskID != "" {
			continue // a follow-up: listed with its task
		}
		turns, err := h.taskTurns(ctx, call, t.TurnID)
		if err != nil {
			return nil, err
		}
		task := a2atask.Build(turns, q.HistoryLength)
		if q.State != "" && task.Status.State != q.State {
			continue
		}
		if q.StatusAfter != nil && (task.Status.Timestamp == nil || !task.Status.Timestamp.After(*q.StatusAfter)) {
			continue
		}
		if !q.IncludeArtifacts {
			task.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, task)
	}
	return out, nil
}
