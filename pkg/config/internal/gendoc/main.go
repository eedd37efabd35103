// Command gendoc writes docs/CONFIGURATION.md from the field comments of package config (see
// package configdoc). `make docs` runs it from the repository root; pkg/config's go:generate
// directive runs it from the package's directory with explicit paths.
//
//	go run ./pkg/config/internal/gendoc [-config pkg/config] [-out docs/CONFIGURATION.md]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/turnstile-run/turnstile/pkg/config/internal/configdoc"
)

func main() {
	dir := flag.String("config", "pkg/config", "directory of package config's source")
	out := flag.String("out", "docs/CONFIGURATION.md", "file to write")
	flag.Parse()
	doc, err := configdoc.Generate(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil { //nolint:gosec // a document in the repository, read by anyone
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
