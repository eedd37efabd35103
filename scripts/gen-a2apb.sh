#!/usr/bin/env bash
# Regenerates pkg/a2apb/a2a.pb.go, the A2A 1.0 data model, from the specification's proto file.
#
#   scripts/gen-a2apb.sh PATH/TO/a2a.proto [VERSION]
#
# PATH/TO/a2a.proto is specification/a2a.proto of github.com/a2aproject/A2A at the tag VERSION
# (default v1.0.1), e.g. `git -C A2A show v1.0.1:specification/a2a.proto > /tmp/a2a.proto`. It is
# not kept in this repository. Needs protoc (Debian: protobuf-compiler, whose libprotobuf-dev
# ships google/protobuf/*.proto) and protoc-gen-go at the version go.mod pins:
#   GOBIN=/tmp/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#
# The google.api annotations (HTTP routes, method signatures, field behaviour) describe the REST
# binding and client generators; they change no type or JSON name. Only they are stripped, so the
# generated code needs no googleapis module, and the Go package is set to pkg/a2apb.
set -euo pipefail
src=${1:?usage: $0 PATH/TO/a2a.proto [VERSION]}
version=${2:-v1.0.1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a2a"
awk '
  /^import "google\/api\// { next }
  /option \(google\.api\.method_signature\)/ { next }
  /option \(google\.api\.http\) = \{/ { depth = 1; next }
  depth > 0 {
    n = gsub(/\{/, "{"); m = gsub(/\}/, "}"); depth += n - m
    next
  }
  /^option go_package/ { print "option go_package = \"github.com/turnstile-run/turnstile/pkg/a2apb\";"; next }
  { gsub(/ \[\(google\.api\.field_behavior\) = [A-Z_]+\]/, ""); print }
' "$src" > "$work/a2a/a2a.proto"
if grep -n 'google\.api' "$work/a2a/a2a.proto" | grep -v '^[0-9]*: *//'; then
  echo "$0: google.api options left after stripping (see above)" >&2
  exit 1
fi
protoc -I "$work" -I /usr/include --go_out="$work" --go_opt=paths=source_relative "$work/a2a/a2a.proto"
{
  echo "// Generated from specification/a2a.proto of github.com/a2aproject/A2A $version (A2A protocol"
  echo "// $version, package lf.a2a.v1) by scripts/gen-a2apb.sh; DO NOT EDIT."
  echo "// The specification is Copyright The A2A Authors, Apache License 2.0."
  echo
  cat "$work/a2a/a2a.pb.go"
} > "$root/pkg/a2apb/a2a.pb.go"
gofmt -l "$root/pkg/a2apb/a2a.pb.go" >/dev/null
echo "wrote pkg/a2apb/a2a.pb.go from $src ($version)"
