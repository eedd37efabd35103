package config

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"time"
)

// Redacted replaces a secret's value in a View.
const Redacted = "(redacted)"

// Setting is one variable of the configuration a process runs with, as View shows it.
type Setting struct {
	// Name is the environment variable, e.g. TURNSTILE_LEASE_TTL.
	Name string `json:"name"`
	// Value is the value in force (after defaults), Redacted for a secret that is set.
	Value string `json:"value"`
	// Secret says the variable holds a credential (its struct field is tagged secret:"true").
	Secret bool `json:"secret,omitempty"`
}

// dsnPassword finds a password in a key=value connection string (Postgres's keyword form).
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// View lists every variable of c, sorted by name, with the values of secrets replaced by Redacted
// and passwords inside connection URLs (TURNSTILE_DATABASE_URL, TURNSTILE_REDIS_URL) masked, so an
// operator can read what a process runs with without reading its credentials. A field is a secret
// when its struct field carries the tag secret:"true" (a test requires it of every variable whose
// name says it holds a key, secret or authorization).
func View(c Config) []Setting {
	var out []Setting
	walk(reflect.ValueOf(c), func(name string, v reflect.Value, secret bool) {
		s := Setting{Name: name, Value: format(v), Secret: secret}
		switch {
		case secret && s.Value != "":
			s.Value = Redacted
		case !secret:
			s.Value = maskPassword(s.Value)
		}
		out = append(out, s)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// walk calls visit for every field of v (a Config or a struct inside it) with an env tag.
func walk(v reflect.Value, visit func(name string, v reflect.Value, secret bool)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name := f.Tag.Get("env"); name != "" {
			visit(name, v.Field(i), f.Tag.Get("secret") == "true")
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			walk(v.Field(i), visit)
		}
	}
}

func format(v reflect.Value) string {
	if d, ok := v.Interface().(time.Duration); ok {
		if d == 0 {
			return "0s"
		}
		return d.String()
	}
	return fmt.Sprint(v.Interface())
}

// maskPassword masks the password of a URL ("redis://:pw@host") or of a keyword connection string
// ("host=db password=pw"); any other value is returned as it is.
func maskPassword(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
	}
	return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
}
