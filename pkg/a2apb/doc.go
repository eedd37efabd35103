// Package a2apb is the A2A protocol 1.0 data model (proto package lf.a2a.v1): the Go types
// protoc-gen-go generates from the specification's own proto file, specification/a2a.proto of
// github.com/a2aproject/A2A at v1.0.1. Nothing in a2a.pb.go is written by hand; run
// scripts/gen-a2apb.sh to regenerate it (it strips only the google.api annotations, which describe
// HTTP routes and client generators and change no type).
//
// The 1.0 JSON-RPC and HTTP+JSON bindings carry these messages in the proto JSON mapping:
// encode and decode them with google.golang.org/protobuf/encoding/protojson (MarshalJSON and
// UnmarshalJSON here), never encoding/json. The A2A front door (services/a2a) answers 1.0
// requests with them and the worker's a2a adapter calls 1.0 agents with them.
package a2apb
