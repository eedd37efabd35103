package configdoc

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Command is how a reader regenerates the document; the file's first line and the staleness
// test's message both name it.
const Command = "make docs"

// header opens the document. The text after it comes from package config's source.
const header = `<!-- Generated from the field comments in pkg/config by ` + "`" + Command + "`" + ` (go run ./pkg/config/internal/gendoc). Do not edit: change the comments and regenerate. -->

# Configuration

Every setting of every role is a ` + "`TURNSTILE_*`" + ` environment variable, read once at start
(package ` + "`pkg/config`" + `). Unset, empty or zero means the default, and the defaults run
` + "`make dev`" + ` against a local Postgres and Redis. A process checks every setting at start and
reports all the violations at once, then refuses to start. Durations are Go durations (` + "`250ms`" + `,
` + "`1m30s`" + `, ` + "`168h`" + `); lists are comma-separated. A process ignores the settings of roles it does
not run.

Tests and tools read a few variables no role reads: ` + "`TURNSTILE_TEST_LOG`" + ` and
` + "`TURNSTILE_TEST_BINARY`" + ` (package ` + "`pkg/testenv`" + `; see [the README's Tests](../README.md#tests)), and the
` + "`TURNSTILE_BENCH_*`" + ` knobs of the gateway benchmark ([BENCHMARKS.md](BENCHMARKS.md)).
`

// Section is one heading of the document: the settings of one role or concern.
type Section struct {
	Title string
	Intro string
	Rows  []Row
}

// Row is one setting.
type Row struct {
	Field    string // the Go field, as Config.Path.Field
	Variable string // the environment variable
	Kind     string // duration, integer, number, true/false or text
	Default  string // what an unset variable means
	Meaning  string // the rest of the comment
}

// Generate reads package config's source in dir and renders the document.
func Generate(dir string) ([]byte, error) {
	sections, err := Read(dir)
	if err != nil {
		return nil, err
	}
	return Render(sections), nil
}

// source is package config's parsed source.
type source struct {
	structs  map[string]*ast.StructType
	headings []heading
}

type heading struct {
	pos          token.Pos
	title, intro string
}

// Read parses package config's source in dir and returns its sections in source order, or every
// violation of the conventions in package configdoc's doc.
func Read(dir string) ([]Section, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	src := source{structs: map[string]*ast.StructType{}}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "config" {
			continue
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					src.structs[ts.Name.Name] = st
				}
			}
		}
		for _, cg := range f.Comments {
			if h, ok := parseHeading(cg); ok {
				src.headings = append(src.headings, h)
			}
		}
	}
	if src.structs["Config"] == nil {
		return nil, fmt.Errorf("no Config struct in %s", dir)
	}
	w := walker{src: src}
	w.walk("Config", "Config")
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	return w.sections, nil
}

// parseHeading recognises a "# Title" comment group.
func parseHeading(cg *ast.CommentGroup) (heading, bool) {
	text := cg.Text()
	first, rest, _ := strings.Cut(text, "\n")
	title, ok := strings.CutPrefix(first, "# ")
	if !ok {
		return heading{}, false
	}
	return heading{pos: cg.Pos(), title: strings.TrimSpace(title), intro: oneLine(rest)}, true
}

type walker struct {
	src      source
	sections []Section
	errs     []error
}

func (w *walker) walk(typeName, path string) {
	st := w.src.structs[typeName]
	next := 0 // the next heading inside st not yet opened
	var inside []heading
	for _, h := range w.src.headings {
		if h.pos > st.Fields.Opening && h.pos < st.Fields.Closing {
			inside = append(inside, h)
		}
	}
	slices.SortFunc(inside, func(a, b heading) int { return int(a.pos - b.pos) })
	for _, field := range st.Fields.List {
		for next < len(inside) && inside[next].pos < field.Pos() {
			w.sections = append(w.sections, Section{Title: inside[next].title, Intro: inside[next].intro})
			next++
		}
		w.field(field, path)
	}
	for ; next < len(inside); next++ {
		w.errs = append(w.errs, fmt.Errorf("%s: heading %q is followed by no field", path, inside[next].title))
	}
}

func (w *walker) field(field *ast.Field, path string) {
	if len(field.Names) != 1 {
		w.errs = append(w.errs, fmt.Errorf("%s: declare one field per line, each with its comment", path))
		return
	}
	name := field.Names[0].Name
	if !field.Names[0].IsExported() {
		return
	}
	variable := ""
	if field.Tag != nil {
		tag, err := strconv.Unquote(field.Tag.Value)
		if err == nil {
			variable = reflect.StructTag(tag).Get("env")
		}
	}
	if id, ok := field.Type.(*ast.Ident); ok && variable == "" && w.src.structs[id.Name] != nil {
		w.walk(id.Name, path+"."+name)
		return
	}
	where := path + "." + name
	if variable == "" {
		w.errs = append(w.errs, fmt.Errorf("%s: no env tag (every setting is an environment variable)", where))
		return
	}
	where += " (" + variable + ")"
	if len(w.sections) == 0 {
		w.errs = append(w.errs, fmt.Errorf("%s: comes before the first # heading", where))
		return
	}
	if field.Doc == nil {
		w.errs = append(w.errs, fmt.Errorf("%s: no doc comment", where))
		return
	}
	text := oneLine(field.Doc.Text())
	rest, ok := strings.CutPrefix(text, name+" ")
	if !ok {
		w.errs = append(w.errs, fmt.Errorf("%s: the comment does not begin with %q", where, name))
		return
	}
	for _, verb := range []string{"is ", "are "} {
		rest = strings.TrimPrefix(rest, verb)
	}
	var def string
	var meaning []string
	for _, s := range sentences(rest) {
		if d, ok := strings.CutPrefix(s, "Defaults to "); ok {
			if def != "" {
				w.errs = append(w.errs, fmt.Errorf("%s: two sentences begin \"Defaults to\"", where))
			}
			def = strings.TrimSuffix(d, ".")
			continue
		}
		meaning = append(meaning, s)
	}
	if def == "" {
		w.errs = append(w.errs, fmt.Errorf("%s: no sentence begins \"Defaults to\"", where))
		return
	}
	sec := &w.sections[len(w.sections)-1]
	sec.Rows = append(sec.Rows, Row{
		Field:    path + "." + name,
		Variable: variable,
		Kind:     kind(field.Type),
		Default:  def,
		Meaning:  upperFirst(strings.Join(meaning, " ")),
	})
}

// kind names a field's Go type in an operator's words.
func kind(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return kind(t.X)
	case *ast.SelectorExpr:
		if t.Sel.Name == "Duration" {
			return "duration"
		}
	case *ast.Ident:
		switch t.Name {
		case "int", "int64", "int32", "uint", "uint32", "uint64":
			return "integer"
		case "float64", "float32":
			return "number"
		case "bool":
			return "true/false"
		}
	}
	return "text"
}

// oneLine joins a comment's lines and collapses its white space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// sentences splits text after each ". " that a capital letter, a digit, a quote, a parenthesis or
// a backquote follows, so "e.g. http://…" and "127.0.0.1" stay whole.
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(text); i++ {
		if text[i] != '.' || text[i+1] != ' ' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(text[i+2:])
		if unicode.IsUpper(r) || unicode.IsDigit(r) || strings.ContainsRune("\"(`", r) {
			out = append(out, text[start:i+1])
			start = i + 2
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// Render writes the document.
func Render(sections []Section) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("\n## Contents\n\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", s.Title, slug(s.Title))
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		if s.Intro != "" {
			b.WriteString(wrap(markdown(s.Intro), 100))
			b.WriteString("\n\n")
		}
		b.WriteString("| variable | kind | default | meaning |\n| --- | --- | --- | --- |\n")
		for _, r := range s.Rows {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Variable, r.Kind, defaultCell(r.Default), markdown(r.Meaning))
		}
	}
	return b.Bytes()
}

// slug is GitHub's anchor of a heading.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks prose at spaces so no line passes width (a longer word stands alone).
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if n+1+len(w) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

var (
	quoted   = regexp.MustCompile(`"([^"]+)"`)
	variable = regexp.MustCompile(`\bTURNSTILE_[A-Z0-9_]*[A-Z0-9]\b(=[a-z0-9-]+)?`)
	readme   = regexp.MustCompile(`README(?:'s)?,? "([^"]+)"`)
)

// defaultCell renders a default: a value of one word is code, and so is the first word of a longer
// default when it is a value (it holds a digit), as in "3s, or a fifth of …".
func defaultCell(d string) string {
	first, rest, more := strings.Cut(d, " ")
	if !more && !strings.ContainsAny(d, "`\"") {
		return "`" + d + "`"
	}
	word := strings.TrimRight(first, ",;:")
	if strings.ContainsAny(word, "0123456789") && !strings.ContainsAny(word, "`\"") {
		return "`" + word + "`" + markdown(first[len(word):]+" "+rest)
	}
	return markdown(d)
}

// markdown turns a comment's prose into a table cell's: quoted literals and variable names become
// code, and what markdown would read as markup outside code is escaped.
func markdown(s string) string {
	s = readme.ReplaceAllStringFunc(s, func(m string) string {
		title := readme.FindStringSubmatch(m)[1]
		return "[README, " + title + "](../README.md#" + slug(title) + ")"
	})
	s = quoted.ReplaceAllString(s, "`$1`")
	prose := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`)
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 { // inside a code span
			b.WriteString("`" + strings.ReplaceAll(part, "|", `\|`) + "`")
			continue
		}
		last := 0
		for _, m := range variable.FindAllStringIndex(part, -1) {
			b.WriteString(prose.Replace(part[last:m[0]]))
			b.WriteString("`" + part[m[0]:m[1]] + "`")
			last = m[1]
		}
		b.WriteString(prose.Replace(part[last:]))
	}
	return b.String()
}
