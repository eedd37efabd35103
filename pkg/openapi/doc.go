// Package openapi embeds turnstile's one OpenAPI 3.1 document: the whole HTTP API, intake's routes
// and the gateway's event stream, with every problem type a client may branch on. Intake serves it
// at /openapi.yaml, and the tests validate every request they make and every response they get
// against it (kin-openapi's openapi3filter), so the document cannot drift from the code unnoticed.
package openapi

import _ "embed"

// Spec is the document, as YAML.
//
//go:embed openapi.yaml
var Spec []byte
