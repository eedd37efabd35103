package tasks

import (
	"context"
	"fmt"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
)

// Push-notification configs are stored with the task by the native API (intake's
// /v1/turns/{task id}/push-configs routes, Postgres) and sent by the notifier role; this front
// door only translates. A config or task that does not exist, or is another tenant's, is "task
// not found" (the SDK's not-found error; protocol 0.3 has no code of its own for a config).

// pushNamespace derives the id of a config sent with a message without one from the messageId, so
// a retried send carries the same config (and the same body for its Idempotency-Key).
var pushNamespace = uuid.MustParse("8b9f2c4e-1d3a-4f7b-a6e2-5c0d9e8f7a61")

// nativePush is an A2A config as the native API takes it, its notifications rendered in the
// protocol version of the request that created it ("1.0", or "" for 0.3).
func nativePush(c a2a.PushConfig, version string) frontdoor.PushConfig {
	pc := frontdoor.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token, A2AVersion: version}
	if c.Auth != nil {
		pc.Authentication = &frontdoor.PushAuthentication{Schemes: c.Auth.Schemes, Credentials: c.Auth.Credentials}
		if pc.Authentication.Schemes == nil {
			pc.Authentication.Schemes = []string{}
		}
	}
	return pc
}

// a2aPush is a stored config as A2A shows it: neither its token nor its credentials are shown
// again (both are optional members of PushNotificationConfig in protocol 0.3, and the native API
// does not answer them).
func a2aPush(task a2a.TaskID, pc frontdoor.PushConfig) *a2a.TaskPushConfig {
	c := a2a.PushConfig{ID: pc.ID, URL: pc.URL}
	if pc.Authentication != nil {
		c.Auth = &a2a.PushAuthInfo{Schemes: pc.Authentication.Schemes}
	}
	return &a2a.TaskPushConfig{TaskID: task, Config: c}
}

// messagePush is the config sent with a message (configuration.pushNotificationConfig), with an
// id derived from the message's when it has none.
func messagePush(m *a2a.Message, c *a2a.PushConfig, version string) []frontdoor.PushConfig {
	if c == nil {
		return nil
	}
	pc := nativePush(*c, version)
	if pc.ID == "" {
		pc.ID = uuid.NewSHA1(pushNamespace, []byte(strconv.Quote(m.ID))).String()
	}
	return []frontdoor.PushConfig{pc}
}

// pushTask checks that id is a task of the caller's tenant and returns its ID as its first turn
// shows it, whichever form (bare or region-prefixed) the client sent.
func (h *Handler) pushTask(ctx context.Context, call *Call, id a2a.TaskID) (a2a.TaskID, error) {
	turns, err := h.taskTurns(ctx, call, string(id))
	if err != nil {
		return "", err
	}
	return a2a.TaskID(turns[0].TurnID), nil
}

// OnSetTaskPushConfig answers tasks/pushNotificationConfig/set: the config applies to every later
// status change of every turn of the task. A config without an id takes the task's ID, as the
// Python and Java SDK servers do: setting one again replaces it, and tasks/pushNotificationConfig/get
// by the task's ID alone (or with that id) finds it.
func (h *Handler) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	call := callFrom(ctx)
	if p.Config.URL == "" {
		return nil, call.fail(fmt.Errorf("pushNotificationConfig.url is required: %w", a2a.ErrInvalidParams))
	}
	task, err := h.pushTask(ctx, call, p.TaskID)
	if err != nil {
		return nil, err
	}
	pc := nativePush(p.Config, call.Version)
	if pc.ID == "" {
		pc.ID = string(task)
	}
	stored, err := h.fd.PutPushConfig(ctx, call.Credential, string(task), pc)
	if err != nil {
		return nil, call.native(err, fmt.Errorf("task %s: %w", task, a2a.ErrTaskNotFound))
	}
	return a2aPush(task, stored), nil
}

// OnGetTaskPushConfig answers tasks/pushNotificationConfig/get: the config of that id, or without
// one the task's oldest config.
func (h *Handler) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	call := callFrom(ctx)
	task, err := h.pushTask(ctx, call, p.TaskID)
	if err != nil {
		return nil, err
	}
	notFound := fmt.Errorf("task %s has no push config %q: %w", task, p.ConfigID, a2a.ErrTaskNotFound)
	if p.ConfigID == "" {
		all, err := h.fd.ListPushConfigs(ctx, call.Credential, string(task))
		if err != nil {
			return nil, call.native(err, notFound)
		}
		if len(all) == 0 {
			return nil, call.fail(notFound)
		}
		return a2aPush(task, all[0]), nil
	}
	pc, err := h.fd.GetPushConfig(ctx, call.Credential, string(task), p.ConfigID)
	if err != nil {
		return nil, call.native(err, notFound)
	}
	return a2aPush(task, pc), nil
}

// OnListTaskPushConfig answers tasks/pushNotificationConfig/list: the task's configs, oldest first.
func (h *Handler) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	call := callFrom(ctx)
	task, err := h.pushTask(ctx, call, p.TaskID)
	if err != nil {
		return nil, err
	}
	all, err := h.fd.ListPushConfigs(ctx, call.Credential, string(task))
	if err != nil {
		return nil, call.native(err, fmt.Errorf("task %s: %w", task, a2a.ErrTaskNotFound))
	}
	out := make([]*a2a.TaskPushConfig, 0, len(all))
	for _, pc := range all {
		out = append(out, a2aPush(task, pc))
	}
	return out, nil
}

// OnDeleteTaskPushConfig answers tasks/pushNotificationConfig/delete: later status changes are not
// sent to the config (notifications already written still are).
func (h *Handler) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	call := callFrom(ctx)
	if p.ConfigID == "" {
		return call.fail(fmt.Errorf("pushNotificationConfigId is required: %w", a2a.ErrInvalidParams))
	}
	task, err := h.pushTask(ctx, call, p.TaskID)
	if err != nil {
		return err
	}
	if err := h.fd.DeletePushConfig(ctx, call.Credential, string(task), p.ConfigID); err != nil {
		return call.native(err, fmt.Errorf("task %s has no push config %q: %w", task, p.ConfigID, a2a.ErrTaskNotFound))
	}
	return nil
}

// OnGetExtendedAgentCard answers that there is no extended card: the public one says everything.
func (h *Handler) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, callFrom(ctx).fail(a2a.ErrAuthenticatedExtendedCardNotConfigured)
}
