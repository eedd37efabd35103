package a2atask

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
)

// Protocol 1.0 reads the same tasks: V1Task and the other V1 functions turn the 0.3 rendering into
// the 1.0 types of package a2apb, and FromV1Message, FromV1PushConfig turn what a 1.0 client sends
// into the 0.3 types the rest of turnstile handles. Nothing is stored twice: a task created through
// either version is the same turns, read through either.

// ErrV1Part is a 1.0 part with none of text, raw, url or data set.
var ErrV1Part = errors.New("a part must have one of text, raw, url, data")

var v1States = map[a2a.TaskState]a2apb.TaskState{
	a2a.TaskStateSubmitted:     a2apb.TaskState_TASK_STATE_SUBMITTED,
	a2a.TaskStateWorking:       a2apb.TaskState_TASK_STATE_WORKING,
	a2a.TaskStateCompleted:     a2apb.TaskState_TASK_STATE_COMPLETED,
	a2a.TaskStateFailed:        a2apb.TaskState_TASK_STATE_FAILED,
	a2a.TaskStateCanceled:      a2apb.TaskState_TASK_STATE_CANCELED,
	a2a.TaskStateInputRequired: a2apb.TaskState_TASK_STATE_INPUT_REQUIRED,
	a2a.TaskStateRejected:      a2apb.TaskState_TASK_STATE_REJECTED,
	a2a.TaskStateAuthRequired:  a2apb.TaskState_TASK_STATE_AUTH_REQUIRED,
}

// V1State is the 1.0 enum of a 0.3 state (TASK_STATE_UNSPECIFIED for unknown).
func V1State(s a2a.TaskState) a2apb.TaskState { return v1States[s] }

// FromV1State is the 0.3 state of a 1.0 enum ("" for TASK_STATE_UNSPECIFIED).
func FromV1State(s a2apb.TaskState) a2a.TaskState {
	for k, v := range v1States {
		if v == s {
			return k
		}
	}
	return a2a.TaskStateUnspecified
}

// V1Task is t in protocol 1.0.
func V1Task(t *a2a.Task) *a2apb.Task {
	if t == nil {
		return nil
	}
	out := &a2apb.Task{Id: string(t.ID), ContextId: t.ContextID, Status: V1Status(t.Status), Metadata: v1Struct(t.Metadata)}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, V1Artifact(a))
	}
	for _, m := range t.History {
		out.History = append(out.History, V1Message(m))
	}
	return out
}

// V1Status is s in protocol 1.0.
func V1Status(s a2a.TaskStatus) *a2apb.TaskStatus {
	out := &a2apb.TaskStatus{State: V1State(s.State), Message: V1Message(s.Message)}
	if s.Timestamp != nil {
		out.Timestamp = timestamppb.New(*s.Timestamp)
	}
	return out
}

// V1Message is m in protocol 1.0.
func V1Message(m *a2a.Message) *a2apb.Message {
	if m == nil {
		return nil
	}
	out := &a2apb.Message{
		MessageId: m.ID, ContextId: m.ContextID, TaskId: string(m.TaskID), Role: a2apb.Role_ROLE_USER,
		Parts: v1Parts(m.Parts), Metadata: v1Struct(m.Metadata), Extensions: m.Extensions,
	}
	if m.Role == a2a.MessageRoleAgent {
		out.Role = a2apb.Role_ROLE_AGENT
	}
	for _, id := range m.ReferenceTasks {
		out.ReferenceTaskIds = append(out.ReferenceTaskIds, string(id))
	}
	return out
}

// V1Artifact is a in protocol 1.0.
func V1Artifact(a *a2a.Artifact) *a2apb.Artifact {
	if a == nil {
		return nil
	}
	return &a2apb.Artifact{
		ArtifactId: string(a.ID), Name: a.Name, Description: a.Description, Parts: v1Parts(a.Parts),
		Metadata: v1Struct(a.Metadata), Extensions: a.Extensions,
	}
}

func v1Parts(ps a2a.ContentParts) []*a2apb.Part {
	out := make([]*a2apb.Part, 0, len(ps))
	for _, p := range ps {
		out = append(out, v1Part(p))
	}
	return out
}

func v1Part(p a2a.Part) *a2apb.Part {
	out := &a2apb.Part{Metadata: v1Struct(p.Meta())}
	switch p := p.(type) {
	case a2a.TextPart:
		out.Content = &a2apb.Part_Text{Text: p.Text}
	case a2a.DataPart:
		v, err := structpb.NewValue(p.Data)
		if err != nil {
			v = structpb.NewNullValue()
		}
		out.Content = &a2apb.Part_Data{Data: v}
	case a2a.FilePart:
		switch f := p.File.(type) {
		case a2a.FileBytes:
			raw, _ := base64.StdEncoding.DecodeString(f.Bytes)
			out.Content, out.Filename, out.MediaType = &a2apb.Part_Raw{Raw: raw}, f.Name, f.MimeType
		case a2a.FileURI:
			out.Content, out.Filename, out.MediaType = &a2apb.Part_Url{Url: f.URI}, f.Name, f.MimeType
		}
	}
	return out
}

// V1Event is one stream event of protocol 0.3 as protocol 1.0's StreamResponse.
func V1Event(ev a2a.Event) (*a2apb.StreamResponse, error) {
	switch ev := ev.(type) {
	case *a2a.Task:
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Task{Task: V1Task(ev)}}, nil
	case *a2a.Message:
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Message{Message: V1Message(ev)}}, nil
	case *a2a.TaskStatusUpdateEvent:
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_StatusUpdate{StatusUpdate: &a2apb.TaskStatusUpdateEvent{
			TaskId: string(ev.TaskID), ContextId: ev.ContextID, Status: V1Status(ev.Status), Metadata: v1Struct(ev.Metadata),
		}}}, nil
	case *a2a.TaskArtifactUpdateEvent:
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_ArtifactUpdate{ArtifactUpdate: &a2apb.TaskArtifactUpdateEvent{
			TaskId: string(ev.TaskID), ContextId: ev.ContextID, Artifact: V1Artifact(ev.Artifact), Append: ev.Append,
			LastChunk: ev.LastChunk, Metadata: v1Struct(ev.Metadata),
		}}}, nil
	}
	return nil, fmt.Errorf("a2atask: no 1.0 form of event %T", ev)
}

// V1PushConfig is a stored config in protocol 1.0.
func V1PushConfig(c *a2a.TaskPushConfig) *a2apb.TaskPushNotificationConfig {
	out := &a2apb.TaskPushNotificationConfig{Id: c.Config.ID, TaskId: string(c.TaskID), Url: c.Config.URL, Token: c.Config.Token}
	if c.Config.Auth != nil && len(c.Config.Auth.Schemes) > 0 {
		out.Authentication = &a2apb.AuthenticationInfo{Scheme: c.Config.Auth.Schemes[0], Credentials: c.Config.Auth.Credentials}
	}
	return out
}

// FromV1PushConfig is a 1.0 config as the 0.3 handler takes it.
func FromV1PushConfig(c *a2apb.TaskPushNotificationConfig) a2a.PushConfig {
	out := a2a.PushConfig{ID: c.GetId(), URL: c.GetUrl(), Token: c.GetToken()}
	if a := c.GetAuthentication(); a != nil {
		out.Auth = &a2a.PushAuthInfo{Credentials: a.GetCredentials(), Schemes: []string{}}
		if a.GetScheme() != "" {
			out.Auth.Schemes = []string{a.GetScheme()}
		}
	}
	return out
}

// FromV1Message is a 1.0 message as the 0.3 handler takes it.
func FromV1Message(m *a2apb.Message) (*a2a.Message, error) {
	if m == nil {
		return nil, nil
	}
	out := &a2a.Message{
		ID: m.GetMessageId(), ContextID: m.GetContextId(), TaskID: a2a.TaskID(m.GetTaskId()),
		Metadata: m.GetMetadata().AsMap(), Extensions: m.GetExtensions(),
	}
	if m.GetMetadata() == nil {
		out.Metadata = nil
	}
	switch m.GetRole() {
	case a2apb.Role_ROLE_USER:
		out.Role = a2a.MessageRoleUser
	case a2apb.Role_ROLE_AGENT:
		out.Role = a2a.MessageRoleAgent
	}
	for _, id := range m.GetReferenceTaskIds() {
		out.ReferenceTasks = append(out.ReferenceTasks, a2a.TaskID(id))
	}
	for i, p := range m.GetParts() {
		part, err := fromV1Part(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// FromV1Event is one event of a 1.0 stream (a StreamResponse) as protocol 0.3's event, for a
// client of a 1.0 agent that handles 0.3's types (the worker's a2a adapter). A StreamResponse
// without a member, or a message or artifact with a part of none of the four kinds, is an error.
func FromV1Event(sr *a2apb.StreamResponse) (a2a.Event, error) {
	switch p := sr.GetPayload().(type) {
	case *a2apb.StreamResponse_Task:
		return FromV1Task(p.Task)
	case *a2apb.StreamResponse_Message:
		m, err := FromV1Message(p.Message)
		if err != nil {
			return nil, fmt.Errorf("message.%w", err)
		}
		if m == nil {
			m = &a2a.Message{}
		}
		return m, nil
	case *a2apb.StreamResponse_StatusUpdate:
		st, err := FromV1Status(p.StatusUpdate.GetStatus())
		if err != nil {
			return nil, fmt.Errorf("statusUpdate.status.%w", err)
		}
		return &a2a.TaskStatusUpdateEvent{
			TaskID: a2a.TaskID(p.StatusUpdate.GetTaskId()), ContextID: p.StatusUpdate.GetContextId(), Status: st,
			Metadata: asMap(p.StatusUpdate.GetMetadata()),
		}, nil
	case *a2apb.StreamResponse_ArtifactUpdate:
		art, err := FromV1Artifact(p.ArtifactUpdate.GetArtifact())
		if err != nil {
			return nil, fmt.Errorf("artifactUpdate.artifact.%w", err)
		}
		return &a2a.TaskArtifactUpdateEvent{
			TaskID: a2a.TaskID(p.ArtifactUpdate.GetTaskId()), ContextID: p.ArtifactUpdate.GetContextId(), Artifact: art,
			Append: p.ArtifactUpdate.GetAppend(), LastChunk: p.ArtifactUpdate.GetLastChunk(),
			Metadata: asMap(p.ArtifactUpdate.GetMetadata()),
		}, nil
	}
	return nil, ErrV1Event
}

// ErrV1Event is a 1.0 StreamResponse with none of task, message, statusUpdate, artifactUpdate set.
var ErrV1Event = errors.New("a stream event must have one of task, message, statusUpdate, artifactUpdate")

// FromV1Task is a 1.0 task in protocol 0.3.
func FromV1Task(t *a2apb.Task) (*a2a.Task, error) {
	st, err := FromV1Status(t.GetStatus())
	if err != nil {
		return nil, fmt.Errorf("task.status.%w", err)
	}
	out := &a2a.Task{ID: a2a.TaskID(t.GetId()), ContextID: t.GetContextId(), Status: st, Metadata: asMap(t.GetMetadata())}
	for i, a := range t.GetArtifacts() {
		art, err := FromV1Artifact(a)
		if err != nil {
			return nil, fmt.Errorf("task.artifacts[%d].%w", i, err)
		}
		out.Artifacts = append(out.Artifacts, art)
	}
	for i, m := range t.GetHistory() {
		msg, err := FromV1Message(m)
		if err != nil {
			return nil, fmt.Errorf("task.history[%d].%w", i, err)
		}
		out.History = append(out.History, msg)
	}
	return out, nil
}

// FromV1Status is a 1.0 task status in protocol 0.3.
func FromV1Status(s *a2apb.TaskStatus) (a2a.TaskStatus, error) {
	m, err := FromV1Message(s.GetMessage())
	if err != nil {
		return a2a.TaskStatus{}, fmt.Errorf("message.%w", err)
	}
	out := a2a.TaskStatus{State: FromV1State(s.GetState()), Message: m}
	if s.GetTimestamp() != nil {
		at := s.GetTimestamp().AsTime()
		out.Timestamp = &at
	}
	return out, nil
}

// FromV1Artifact is a 1.0 artifact in protocol 0.3.
func FromV1Artifact(a *a2apb.Artifact) (*a2a.Artifact, error) {
	if a == nil {
		return nil, nil
	}
	out := &a2a.Artifact{
		ID: a2a.ArtifactID(a.GetArtifactId()), Name: a.GetName(), Description: a.GetDescription(),
		Metadata: asMap(a.GetMetadata()), Extensions: a.GetExtensions(),
	}
	for i, p := range a.GetParts() {
		part, err := fromV1Part(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// asMap is a proto Struct as metadata (nil for none).
func asMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

func fromV1Part(p *a2apb.Part) (a2a.Part, error) {
	var md map[string]any
	if p.GetMetadata() != nil {
		md = p.GetMetadata().AsMap()
	}
	meta := a2a.FileMeta{Name: p.GetFilename(), MimeType: p.GetMediaType()}
	switch c := p.GetContent().(type) {
	case *a2apb.Part_Text:
		return a2a.TextPart{Text: c.Text, Metadata: md}, nil
	case *a2apb.Part_Raw:
		return a2a.FilePart{File: a2a.FileBytes{FileMeta: meta, Bytes: base64.StdEncoding.EncodeToString(c.Raw)}, Metadata: md}, nil
	case *a2apb.Part_Url:
		return a2a.FilePart{File: a2a.FileURI{FileMeta: meta, URI: c.Url}, Metadata: md}, nil
	case *a2apb.Part_Data:
		data, ok := c.Data.AsInterface().(map[string]any)
		if !ok {
			data = map[string]any{"value": c.Data.AsInterface()}
		}
		return a2a.DataPart{Data: data, Metadata: md}, nil
	}
	return nil, ErrV1Part
}

// v1Struct is metadata as a proto Struct (nil for none; a value JSON cannot hold is left out).
func v1Struct(m map[string]any) *structpb.Struct {
	if len(m) == 0 {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}
