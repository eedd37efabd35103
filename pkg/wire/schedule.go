package wire

import (
	"encoding/json"
	"time"
)

// Schedule is a schedule as the native API shows it (/v1/schedules): intake answers it and the
// front doors (pkg/frontdoor) read it.
type Schedule struct {
	ScheduleID string          `json:"schedule_id"`
	Schedule   string          `json:"schedule"`
	Timezone   string          `json:"timezone"`
	SessionID  *string         `json:"session_id"`
	Turn       json.RawMessage `json:"turn"`
	Metadata   json.RawMessage `json:"metadata"`
	Enabled    bool            `json:"enabled"`
	EndTime    *time.Time      `json:"end_time"`
	NextFireAt *time.Time      `json:"next_fire_at"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// SchedulePage is the answer of GET /v1/schedules: a page of schedules and how many match in all.
type SchedulePage struct {
	Schedules []Schedule `json:"schedules"`
	Total     int        `json:"total"`
}
