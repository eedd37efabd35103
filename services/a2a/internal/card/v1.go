package card

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
)

// V1ProtocolVersion is the protocol 1.0 version the card's interfaces name.
const V1ProtocolVersion = "1.0"

// V1 is c as protocol 1.0's AgentCard: its supportedInterfaces are the JSON-RPC endpoint (c.URL;
// 1.0 and, listed after it, 0.3) and the HTTP+JSON binding at restURL.
func V1(c *a2a.AgentCard, restURL string) *a2apb.AgentCard {
	out := &a2apb.AgentCard{
		Name: c.Name, Description: c.Description, Version: c.Version,
		SupportedInterfaces: []*a2apb.AgentInterface{
			{Url: c.URL, ProtocolBinding: string(a2a.TransportProtocolJSONRPC), ProtocolVersion: V1ProtocolVersion},
			{Url: restURL, ProtocolBinding: string(a2a.TransportProtocolHTTPJSON), ProtocolVersion: V1ProtocolVersion},
			{Url: c.URL, ProtocolBinding: string(a2a.TransportProtocolJSONRPC), ProtocolVersion: ProtocolVersion},
		},
		Capabilities: &a2apb.AgentCapabilities{
			Streaming: &c.Capabilities.Streaming, PushNotifications: &c.Capabilities.PushNotifications,
		},
		DefaultInputModes: c.DefaultInputModes, DefaultOutputModes: c.DefaultOutputModes,
	}
	for _, sk := range c.Skills {
		out.Skills = append(out.Skills, &a2apb.AgentSkill{Id: sk.ID, Name: sk.Name, Description: sk.Description, Tags: sk.Tags})
	}
	if len(c.SecuritySchemes) > 0 {
		out.SecuritySchemes = map[string]*a2apb.SecurityScheme{}
		for name, s := range c.SecuritySchemes {
			if h, ok := s.(a2a.HTTPAuthSecurityScheme); ok {
				out.SecuritySchemes[string(name)] = &a2apb.SecurityScheme{Scheme: &a2apb.SecurityScheme_HttpAuthSecurityScheme{
					HttpAuthSecurityScheme: &a2apb.HTTPAuthSecurityScheme{Scheme: h.Scheme, Description: h.Description, BearerFormat: h.BearerFormat},
				}}
			}
		}
		for _, req := range c.Security {
			r := &a2apb.SecurityRequirement{Schemes: map[string]*a2apb.StringList{}}
			for name, scopes := range req {
				r.Schemes[string(name)] = &a2apb.StringList{List: append([]string{}, scopes...)}
			}
			out.SecurityRequirements = append(out.SecurityRequirements, r)
		}
	}
	return out
}

// JSON is the card both protocol versions read: the 0.3 card's members (url,
// preferredTransport, protocolVersion, security, ...) and 1.0's (supportedInterfaces,
// securityRequirements, ...). Where both name a member, it holds both: each security scheme
// is 0.3's object ({"type":"http","scheme":...}) also carrying 1.0's member
// (httpAuthSecurityScheme), and capabilities carry both versions' flags; each version's reader
// ignores the members it does not know.
func JSON(c *a2a.AgentCard, restURL string) ([]byte, error) {
	old, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	cur, err := a2apb.MarshalJSON(V1(c, restURL))
	if err != nil {
		return nil, err
	}
	var merged, next map[string]json.RawMessage
	if err := json.Unmarshal(old, &merged); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cur, &next); err != nil {
		return nil, err
	}
	for k, v := range next {
		if prev, ok := merged[k]; ok {
			if v, err = mergeObjects(prev, v, k == "securitySchemes"); err != nil {
				return nil, err
			}
		}
		merged[k] = v
	}
	return json.Marshal(merged)
}

// mergeObjects merges two JSON objects' members, the first's winning; with deep, members that are
// objects in both are merged in turn. Values that are not both objects are the first's.
func mergeObjects(first, second json.RawMessage, deep bool) (json.RawMessage, error) {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(first, &a) != nil || json.Unmarshal(second, &b) != nil {
		return first, nil
	}
	for k, v := range b {
		prev, ok := a[k]
		switch {
		case !ok:
			a[k] = v
		case deep:
			m, err := mergeObjects(prev, v, false)
			if err != nil {
				return nil, err
			}
			a[k] = m
		}
	}
	return json.Marshal(a)
}
