package tasks

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"
)

// Push notifications are not offered (the card says so): a webhook delivery needs the notifier's
// outbox, which this front door does not have.

// OnGetTaskPushConfig answers that push notifications are not supported.
func (h *Handler) OnGetTaskPushConfig(ctx context.Context, _ *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, callFrom(ctx).fail(a2a.ErrPushNotificationNotSupported)
}

// OnListTaskPushConfig answers that push notifications are not supported.
func (h *Handler) OnListTaskPushConfig(ctx context.Context, _ *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, callFrom(ctx).fail(a2a.ErrPushNotificationNotSupported)
}

// OnSetTaskPushConfig answers that push notifications are not supported.
func (h *Handler) OnSetTaskPushConfig(ctx context.Context, _ *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, callFrom(ctx).fail(a2a.ErrPushNotificationNotSupported)
}

// OnDeleteTaskPushConfig answers that push notifications are not supported.
func (h *Handler) OnDeleteTaskPushConfig(ctx context.Context, _ *a2a.DeleteTaskPushConfigParams) error {
	return callFrom(ctx).fail(a2a.ErrPushNotificationNotSupported)
}

// OnGetExtendedAgentCard answers that there is no extended card: the public one says everything.
func (h *Handler) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, callFrom(ctx).fail(a2a.ErrAuthenticatedExtendedCardNotConfigured)
}
