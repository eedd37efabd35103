package a2apb

import (
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MarshalJSON encodes m in the proto JSON mapping as the 1.0 bindings send it: camelCase member
// names, enums by name (TASK_STATE_COMPLETED), unset members left out.
func MarshalJSON(m proto.Message) ([]byte, error) { return protojson.Marshal(m) }

// UnmarshalJSON decodes b into m by the proto JSON mapping. Unknown members are ignored, as a
// later minor version may add some (unknown enum names too: they read as the zero value); a
// member of the wrong type is an error.
func UnmarshalJSON(b []byte, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
}
