// Package configdoc renders docs/CONFIGURATION.md from the source of package config, so the
// operator's reference is the field comments themselves and cannot drift from them.
//
// It reads the Go files of package config with go/parser (it never imports the package, so the
// package's own test can call it) and walks the Config struct in source order, descending into the
// settings structs it embeds by value. Every field with an `env` tag becomes a row: the variable,
// its kind (from the Go type), its default and its meaning, both taken from the field's doc comment.
// The conventions the comments follow are what make that possible:
//
//   - A field's comment begins with the field's name ("LeaseTTL is how long…"); the name, and an
//     "is"/"are" after it, are dropped in the row, whose first column already names the setting.
//   - One sentence of the comment begins "Defaults to " and says what an unset variable means; it
//     becomes the default column.
//   - A comment group of its own inside a struct (separated from the next field by a blank line)
//     whose first line is "# Title" starts a section of the document; the lines after the title
//     are the section's introduction. Sections group the settings by the role that reads them.
//
// Generate reports every field that breaks a convention (no comment, no default sentence, no env
// tag) at once, so a new setting cannot reach main undocumented: pkg/config's test regenerates
// the document in memory and fails when the file differs or when Generate fails.
package configdoc
