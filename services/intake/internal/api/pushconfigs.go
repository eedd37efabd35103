package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Push config bounds.
const (
	PushConfigIDMaxLen     = 128
	PushConfigsMax         = 10
	PushConfigSchemesMax   = 8
	PushConfigSchemeMaxLen = 64
)

// pushAuthentication is a push config's authentication (A2A's PushNotificationAuthenticationInfo):
// with Bearer (or Basic) among the schemes, the notifier sends "Authorization: <scheme>
// <credentials>". Credentials are never shown again.
type pushAuthentication struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

// pushConfigRequest is one push-notification config of a task: its id, the URL every status
// change of the task's turns is POSTed to (the A2A Task), the token sent in
// X-A2A-Notification-Token, the authentication, and the A2A protocol version the notifications
// are rendered in (0.3's Task, or 1.0's StreamResponse carrying it).
type pushConfigRequest struct {
	ID             string              `json:"id"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *pushAuthentication `json:"authentication,omitempty"`
	A2AVersion     string              `json:"a2a_version,omitempty"`
}

// The A2A versions a push config's notifications are rendered in; an absent a2a_version is 0.3.
const (
	A2AVersion03 = "0.3"
	A2AVersion10 = "1.0"
)

// a2aVersion is c's version as stored.
func (c pushConfigRequest) a2aVersion() string {
	if c.A2AVersion == "" {
		return A2AVersion03
	}
	return c.A2AVersion
}

// pushConfigView is a stored config as the API shows it: neither its token nor its credentials,
// which are write-only (whoever may read a task's configs need not be able to forge its
// notifications).
type pushConfigView struct {
	ID             string              `json:"id"`
	URL            string              `json:"url"`
	Authentication *pushAuthentication `json:"authentication,omitempty"`
	A2AVersion     string              `json:"a2a_version"`
	CreatedAt      time.Time           `json:"created_at"`
}

// checkPushConfig validates one config's shape; field names the config in the detail.
func checkPushConfig(field string, c pushConfigRequest, allowHTTP bool) *httpx.Problem {
	switch {
	case c.ID == "" || len(c.ID) > PushConfigIDMaxLen:
		return problem(httpx.ProblemValidation, fmt.Sprintf("%s.id must be 1 to %d characters", field, PushConfigIDMaxLen))
	case strings.ContainsAny(c.ID, "/?#"):
		return problem(httpx.ProblemValidation, field+".id must not contain /, ? or #")
	}
	if p := checkHookToken(field+".id", c.ID); p != nil {
		return p
	}
	if p := checkHookURL(field+".url", c.URL, allowHTTP); p != nil {
		return p
	}
	if p := checkHookToken(field+".token", c.Token); p != nil {
		return p
	}
	if v := c.A2AVersion; v != "" && v != A2AVersion03 && v != A2AVersion10 {
		return problem(httpx.ProblemValidation, fmt.Sprintf("%s.a2a_version must be %q or %q", field, A2AVersion03, A2AVersion10))
	}
	a := c.Authentication
	if a == nil {
		return nil
	}
	if len(a.Schemes) > PushConfigSchemesMax {
		return problem(httpx.ProblemValidation, fmt.Sprintf("%s.authentication.schemes must hold at most %d schemes", field, PushConfigSchemesMax))
	}
	sendable := false
	for _, s := range a.Schemes {
		if s == "" || len(s) > PushConfigSchemeMaxLen {
			return problem(httpx.ProblemValidation, fmt.Sprintf("%s.authentication.schemes must be 1 to %d characters each", field, PushConfigSchemeMaxLen))
		}
		if p := checkHookToken(field+".authentication.schemes", s); p != nil {
			return p
		}
		sendable = sendable || strings.EqualFold(s, "bearer") || strings.EqualFold(s, "basic")
	}
	if a.Credentials != "" && !sendable {
		return problem(httpx.ProblemValidation, field+".authentication: credentials are sent only for the Bearer or Basic scheme")
	}
	return checkHookToken(field+".authentication.credentials", a.Credentials)
}

// checkPushConfigs validates a turn's push configs: at most PushConfigsMax, distinct ids.
func checkPushConfigs(cs []pushConfigRequest, allowHTTP bool) *httpx.Problem {
	if len(cs) > PushConfigsMax {
		return problem(httpx.ProblemValidation, fmt.Sprintf("push_configs must hold at most %d configs", PushConfigsMax))
	}
	seen := map[string]bool{}
	for i, c := range cs {
		if p := checkPushConfig(fmt.Sprintf("push_configs[%d]", i), c, allowHTTP); p != nil {
			return p
		}
		if seen[c.ID] {
			return problem(httpx.ProblemValidation, fmt.Sprintf("push_configs[%d].id %q is not unique", i, c.ID))
		}
		seen[c.ID] = true
	}
	return nil
}

// envelopePushConfigs is the configs as the envelope carries them (nil for none): the first
// statement that writes the turn stores them with its task (pkg/turnstore).
func envelopePushConfigs(cs []pushConfigRequest) []wire.PushConfig {
	if len(cs) == 0 {
		return nil
	}
	out := make([]wire.PushConfig, 0, len(cs))
	for _, c := range cs {
		pc := wire.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token, A2AVersion: c.a2aVersion()}
		if a := c.Authentication; a != nil {
			pc.AuthSchemes, pc.AuthCredentials = a.Schemes, a.Credentials
		}
		out = append(out, pc)
	}
	return out
}

// pushConfigColumns are a config's columns in pushConfigView order.
const pushConfigColumns = `config_id, url, auth_schemes, a2a_version, created_at`

func scanPushConfig(row pgx.CollectableRow) (pushConfigView, error) {
	var v pushConfigView
	var schemes []string
	if err := row.Scan(&v.ID, &v.URL, &schemes, &v.A2AVersion, &v.CreatedAt); err != nil {
		return v, err
	}
	if len(schemes) > 0 {
		v.Authentication = &pushAuthentication{Schemes: schemes}
	}
	return v, nil
}

// pushConfigRoute reads the task (its first turn, the caller's tenant's) and, for the routes of one
// config, its id.
func (h *Handler) pushConfigRoute(w http.ResponseWriter, r *http.Request, route string, withID bool) (turnstore.Turn, string, bool) {
	t, ok := h.loadTurn(w, r, route)
	if !ok {
		return t, "", false
	}
	if !withID {
		return t, "", true
	}
	id := chi.URLParam(r, "config_id")
	if id == "" || len(id) > PushConfigIDMaxLen {
		h.refuse(w, route, httpx.ProblemValidation.Problem(fmt.Sprintf("config_id must be 1 to %d characters", PushConfigIDMaxLen)))
		return t, "", false
	}
	return t, id, true
}

// storeFailed answers a push-config statement that failed: Postgres is unavailable.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, route string, err error) {
	h.d.Log.WarnContext(r.Context(), "push config statement failed", "route", route, "err", err)
	h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("push configs are temporarily unavailable"))
}

// putPushConfig answers PUT /v1/turns/{turn_id}/push-configs/{config_id}: it creates or replaces
// the config of the task whose first turn is turn_id, and answers it.
func (h *Handler) putPushConfig(w http.ResponseWriter, r *http.Request) {
	const route = "put_push_config"
	if !acceptableContentType(r.Header.Get("Content-Type")) {
		h.refuse(w, route, httpx.ProblemUnsupportedType.Problem("the body must be application/json"))
		return
	}
	var c pushConfigRequest
	dec := json.NewDecoder(httpx.LimitBody(w, r, h.cfg.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, route, httpx.ProblemBodyTooLarge.Problem(fmt.Sprintf("the body exceeds %d bytes", tooBig.Limit)))
			return
		}
		h.refuse(w, route, httpx.ProblemInvalidBody.Problem("malformed JSON: "+err.Error()))
		return
	}
	t, id, ok := h.pushConfigRoute(w, r, route, true)
	if !ok {
		return
	}
	if c.ID != "" && c.ID != id {
		h.refuse(w, route, httpx.ProblemValidation.Problem("id must be the config_id of the path"))
		return
	}
	c.ID = id
	if p := checkPushConfig("config", c, h.cfg.WebhookAllowHTTP); p != nil {
		h.refuse(w, route, *p)
		return
	}
	schemes, creds := []string{}, ""
	if c.Authentication != nil {
		schemes, creds = c.Authentication.Schemes, c.Authentication.Credentials
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	v, full, err := h.storePushConfig(ctx, t, id, c, schemes, creds)
	switch {
	case full > 0:
		h.refuse(w, route, httpx.ProblemPushConfigsLimit.Problem(fmt.Sprintf(
			"a task has at most %d push configs and this one has them all: delete one first", full)))
		return
	case errors.Is(err, pgx.ErrNoRows):
		h.refuse(w, route, httpx.ProblemTurnNotFound.Problem("no such turn"))
		return
	case err != nil:
		h.storeFailed(w, r, route, err)
		return
	}
	h.d.Log.InfoContext(r.Context(), "push config stored", "turn_id", t.TurnID, "tenant", t.Tenant, "config_id", id)
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, v)
}

// storePushConfig creates or replaces config id of the task whose first turn is t, under the
// task's bound (TURNSTILE_PUSH_CONFIGS_MAX, read from the session setting the trigger on
// task_push_configs reads): in one transaction it takes the lock that trigger takes, counts the
// task's other configs and stores the config only below the bound, so concurrent PUTs of one task
// store at most the bound between them. full is the bound when the task is full (nothing stored);
// pgx.ErrNoRows is a config of that id stored by another tenant.
func (h *Handler) storePushConfig(ctx context.Context, t turnstore.Turn, id string, c pushConfigRequest, schemes []string, creds string) (v pushConfigView, full int, err error) {
	tx, err := h.d.Pool.Begin(ctx)
	if err != nil {
		return v, 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('task_push_configs:' || $1::uuid::text, 0))`, t.TurnID); err != nil {
		return v, 0, err
	}
	var others, most int
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(nullif(current_setting('turnstile.push_configs_max', true), '')::int, 10)
		FROM task_push_configs WHERE task_id = $1 AND tenant = $2 AND config_id <> $3`, t.TurnID, t.Tenant, id).Scan(&others, &most); err != nil {
		return v, 0, err
	}
	if others >= most {
		return v, most, nil
	}
	rows, err := tx.Query(ctx, `INSERT INTO task_push_configs (task_id, config_id, tenant, url, token, auth_schemes, auth_credentials, a2a_version)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6, nullif($7, ''), $8)
		ON CONFLICT (task_id, config_id) DO UPDATE SET url = EXCLUDED.url, token = EXCLUDED.token,
			auth_schemes = EXCLUDED.auth_schemes, auth_credentials = EXCLUDED.auth_credentials,
			a2a_version = EXCLUDED.a2a_version
		WHERE task_push_configs.tenant = EXCLUDED.tenant
		RETURNING `+pushConfigColumns, t.TurnID, id, t.Tenant, c.URL, c.Token, schemes, creds, c.a2aVersion())
	if err == nil {
		v, err = pgx.CollectExactlyOneRow(rows, scanPushConfig)
	}
	if err != nil {
		return v, 0, err
	}
	return v, 0, tx.Commit(ctx)
}

// listPushConfigs answers GET /v1/turns/{turn_id}/push-configs: the task's configs, oldest first.
func (h *Handler) listPushConfigs(w http.ResponseWriter, r *http.Request) {
	const route = "list_push_configs"
	t, _, ok := h.pushConfigRoute(w, r, route, false)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT `+pushConfigColumns+` FROM task_push_configs
		WHERE task_id = $1 AND tenant = $2 ORDER BY created_at, config_id`, t.TurnID, t.Tenant)
	var out []pushConfigView
	if err == nil {
		out, err = pgx.CollectRows(rows, scanPushConfig)
	}
	if err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	if out == nil {
		out = []pushConfigView{}
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"push_configs": out})
}

// getPushConfig answers GET /v1/turns/{turn_id}/push-configs/{config_id}.
func (h *Handler) getPushConfig(w http.ResponseWriter, r *http.Request) {
	const route = "get_push_config"
	t, id, ok := h.pushConfigRoute(w, r, route, true)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT `+pushConfigColumns+` FROM task_push_configs
		WHERE task_id = $1 AND tenant = $2 AND config_id = $3`, t.TurnID, t.Tenant, id)
	var v pushConfigView
	if err == nil {
		v, err = pgx.CollectExactlyOneRow(rows, scanPushConfig)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		h.refuse(w, route, httpx.ProblemPushConfigNotFound.Problem("no such push config"))
		return
	case err != nil:
		h.storeFailed(w, r, route, err)
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, v)
}

// deletePushConfig answers DELETE /v1/turns/{turn_id}/push-configs/{config_id}: the config sends
// nothing for later status changes (notifications already written are still delivered).
func (h *Handler) deletePushConfig(w http.ResponseWriter, r *http.Request) {
	const route = "delete_push_config"
	t, id, ok := h.pushConfigRoute(w, r, route, true)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	tag, err := h.d.Pool.Exec(ctx, `DELETE FROM task_push_configs WHERE task_id = $1 AND tenant = $2 AND config_id = $3`,
		t.TurnID, t.Tenant, id)
	switch {
	case err != nil:
		h.storeFailed(w, r, route, err)
		return
	case tag.RowsAffected() == 0:
		h.refuse(w, route, httpx.ProblemPushConfigNotFound.Problem("no such push config"))
		return
	}
	h.d.Log.InfoContext(r.Context(), "push config deleted", "turn_id", t.TurnID, "tenant", t.Tenant, "config_id", id)
	h.requests.WithLabelValues(route, "ok").Inc()
	w.WriteHeader(http.StatusNoContent)
}
