package httpagent

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Schemas holds the protocol's JSON Schemas, the files docs/http-agent-protocol.md links to:
// schema/request.schema.json (the body the agent is sent) and schema/events.schema.json (one event
// of its answer). The worker validates every event it reads against the second.
//
//go:embed schema/request.schema.json schema/events.schema.json
var Schemas embed.FS

// eventTypes lists the event types in the schema's order; eventSchemas holds each one's schema
// ($defs/<type>), so an event is checked against its own type's rules and an error names its field
// rather than every alternative.
var eventTypes, eventSchemas = compileEventSchemas()

const eventsSchemaFile = "schema/events.schema.json"

func compileEventSchemas() ([]string, map[string]*jsonschema.Schema) {
	raw, err := Schemas.ReadFile(eventsSchemaFile)
	if err != nil {
		panic("httpagent: " + err.Error())
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		panic("httpagent: events schema: " + err.Error())
	}
	var shape struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		panic("httpagent: events schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "turnstile:///" + eventsSchemaFile
	if err := c.AddResource(url, doc); err != nil {
		panic("httpagent: events schema: " + err.Error())
	}
	c.MustCompile(url) // the whole document is valid, not only the parts the worker uses
	out := make(map[string]*jsonschema.Schema, len(shape.Properties.Type.Enum))
	for _, t := range shape.Properties.Type.Enum {
		out[t] = c.MustCompile(url + "#/$defs/" + t)
	}
	return shape.Properties.Type.Enum, out
}

// decodeEvent decodes the n-th event (from 1) of an answer and checks it against the protocol's
// schema. sseType is the server-sent event's name, empty for NDJSON; a name other than the default
// "message" stands for the object's "type". An event that does not match is a permanent error that
// names the event and the field, such as `event 3 (tool_call): missing required property "call_id"`.
func decodeEvent(n int, sseType string, data []byte) (Event, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return Event{}, invalid(n, "", "not JSON: "+err.Error())
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return Event{}, invalid(n, "", "want an object, got "+jsonKind(doc))
	}
	if sseType != "" && sseType != "message" {
		obj["type"] = sseType
	}
	t, present := obj["type"]
	if !present {
		return Event{}, invalid(n, "", `missing required property "type"`)
	}
	typ, _ := t.(string)
	sch := eventSchemas[typ]
	if sch == nil {
		got, _ := json.Marshal(t)
		return Event{}, invalid(n, "", fmt.Sprintf(`property "type": %s is not one of %s`, got, strings.Join(eventTypes, ", ")))
	}
	if err := sch.Validate(obj); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Event{}, invalid(n, typ, err.Error())
		}
		return Event{}, invalid(n, typ, describe(ve))
	}
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		// The schema allows what Go cannot hold, say a token count beyond int64.
		return Event{}, invalid(n, typ, err.Error())
	}
	ev.Type = typ
	return ev, nil
}

// invalid is the error for the n-th event, of type typ when it is known.
func invalid(n int, typ, msg string) error {
	if typ != "" {
		return fmt.Errorf("http agent event %d (%s): %s: %w", n, typ, msg, agent.ErrPermanent)
	}
	return fmt.Errorf("http agent event %d: %s: %w", n, msg, agent.ErrPermanent)
}

var printer = message.NewPrinter(language.English)

// describe says what is wrong in a validation error, one sentence per failed rule, each naming its
// property.
func describe(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		prop := strings.Join(e.InstanceLocation, "/")
		in := ""
		if prop != "" {
			in = fmt.Sprintf("property %q: ", prop)
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				out = append(out, fmt.Sprintf("%smissing required property %q", in, m))
			}
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				out = append(out, fmt.Sprintf("%sunknown property %q", in, p))
			}
		case *kind.Type:
			out = append(out, fmt.Sprintf("%swant %s, got %s", in, strings.Join(k.Want, " or "), k.Got))
		default:
			out = append(out, in+e.ErrorKind.LocalizedString(printer))
		}
	}
	walk(ve)
	slices.Sort(out)
	return strings.Join(slices.Compact(out), "; ")
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
