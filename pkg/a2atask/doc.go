// Package a2atask is how turnstile's turns read as A2A tasks (protocol 0.3, the a2a-go SDK's
// types). It is shared by the A2A front door (services/a2a, which answers tasks/get with it) and
// the notifier (services/notifier, which POSTs the same rendering to a task's push-notification
// configs), so a pushed Task is exactly what tasks/get would have answered at that change.
//
// A task is its first turn (the task ID is that turn's ID) and the follow-up turns whose metadata
// names it under MetadataKey ({"a2a": {"task_id": ..., "message_id": ...}}); turnstore.TaskOf
// reads the same member into turns.task_id, which the outbox trigger files the task's
// notifications by. A turn's status maps to a task state: queued is submitted,
// running is working, succeeded is completed (or the output's state, input-required or
// auth-required), failed and expired are failed, cancelled is canceled. A task's history is its
// turns' inputs and outputs, oldest first; each turn's output is an artifact "response-<turn id>".
package a2atask
