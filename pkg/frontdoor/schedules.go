package frontdoor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Schedule is a schedule as the native API shows it (/v1/schedules).
type Schedule = wire.Schedule

// ScheduleRequest is the body of POST and PATCH /v1/schedules…; unset members are omitted
// (a PATCH leaves them as they are).
type ScheduleRequest struct {
	Schedule  *string        `json:"schedule,omitempty"`
	Timezone  *string        `json:"timezone,omitempty"`
	SessionID string         `json:"session_id,omitempty"`
	Turn      *TurnRequest   `json:"turn,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Enabled   *bool          `json:"enabled,omitempty"`
	// EndTime is an RFC 3339 time or null (a PATCH then removes the end); empty leaves it.
	EndTime json.RawMessage `json:"end_time,omitempty"`
}

// ScheduleQuery selects schedules; zero members select all.
type ScheduleQuery struct {
	// SessionID selects one session's schedules; "-" those that post to a new session each tick.
	SessionID string
	Enabled   *bool
	// Metadata selects schedules whose metadata contains it.
	Metadata map[string]any
	// Limit 0 asks only for the total.
	Limit  int
	Offset int
	// SortBy is created_at, updated_at or next_fire_at; Desc sorts descending.
	SortBy string
	Desc   bool
}

// SchedulePage is a page of schedules and how many match in all.
type SchedulePage = wire.SchedulePage

func (c *Client) schedulesURL() string { return c.intake + "/v1/schedules" }

// CreateSchedule creates a schedule of the credential's tenant.
func (c *Client) CreateSchedule(ctx context.Context, cred Credential, req ScheduleRequest) (Schedule, error) {
	return c.sendSchedule(ctx, cred, http.MethodPost, c.schedulesURL(), req)
}

// UpdateSchedule changes a schedule of the credential's tenant.
func (c *Client) UpdateSchedule(ctx context.Context, cred Credential, id string, req ScheduleRequest) (Schedule, error) {
	return c.sendSchedule(ctx, cred, http.MethodPatch, c.schedulesURL()+"/"+url.PathEscape(id), req)
}

func (c *Client) sendSchedule(ctx context.Context, cred Credential, method, u string, req ScheduleRequest) (Schedule, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Schedule{}, fmt.Errorf("encode schedule: %w", err)
	}
	var out Schedule
	err = c.call(ctx, cred, method, u, http.Header{"Content-Type": {"application/json"}}, body, &out)
	return out, err
}

// GetSchedule reads a schedule of the credential's tenant.
func (c *Client) GetSchedule(ctx context.Context, cred Credential, id string) (Schedule, error) {
	var out Schedule
	err := c.call(ctx, cred, http.MethodGet, c.schedulesURL()+"/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// ListSchedules reads a page of the credential's tenant's schedules.
func (c *Client) ListSchedules(ctx context.Context, cred Credential, q ScheduleQuery) (SchedulePage, error) {
	v := url.Values{"limit": {strconv.Itoa(q.Limit)}}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.SessionID != "" {
		v.Set("session_id", q.SessionID)
	}
	if q.Enabled != nil {
		v.Set("enabled", strconv.FormatBool(*q.Enabled))
	}
	if len(q.Metadata) > 0 {
		md, err := json.Marshal(q.Metadata)
		if err != nil {
			return SchedulePage{}, fmt.Errorf("encode metadata filter: %w", err)
		}
		v.Set("metadata", string(md))
	}
	if q.SortBy != "" {
		v.Set("sort_by", q.SortBy)
	}
	if q.Desc {
		v.Set("sort_order", "desc")
	}
	var out SchedulePage
	err := c.call(ctx, cred, http.MethodGet, c.schedulesURL()+"?"+v.Encode(), nil, nil, &out)
	return out, err
}

// DeleteSchedule deletes a schedule of the credential's tenant.
func (c *Client) DeleteSchedule(ctx context.Context, cred Credential, id string) error {
	return c.call(ctx, cred, http.MethodDelete, c.schedulesURL()+"/"+url.PathEscape(id), nil, nil, nil)
}
