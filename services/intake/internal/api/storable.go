package api

import (
	"fmt"
	"strings"
)

// MetadataMaxDepth is how deeply metadata may nest objects and arrays (the metadata object itself
// is depth 1). Postgres parses jsonb recursively, so a deep enough value fails the worker's claim
// with "stack depth limit exceeded"; intake refuses it instead, far below that point.
const MetadataMaxDepth = 32

// unstorable reports why a parsed turn cannot be stored as the worker stores it, or "" when it can:
// Postgres holds no NUL character in text or jsonb (it refuses U+0000 and the \u0000 escape), and
// nests jsonb only so deep. Every string that reaches a text or jsonb column is checked: the input
// text, and the metadata's keys and string values at any depth.
//
// An unpaired surrogate escape (\ud800) or invalid UTF-8 needs no check: the decoder has already
// replaced it with U+FFFD, which the envelope carries and Postgres stores as it is, so what the
// turn's status shows is what the agent received.
func unstorable(req postTurnRequest) string {
	if strings.IndexByte(req.Input.Text, 0) >= 0 {
		return "input.text must not contain a NUL character (U+0000)"
	}
	if req.Metadata == nil {
		return ""
	}
	return unstorableValue("metadata", req.Metadata, 1)
}

// unstorableValue checks one decoded JSON value at path, depth levels deep.
func unstorableValue(path string, v any, depth int) string {
	switch v := v.(type) {
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return path + " must not contain a NUL character (U+0000)"
		}
	case map[string]any:
		if depth > MetadataMaxDepth {
			return fmt.Sprintf("metadata must not nest deeper than %d levels", MetadataMaxDepth)
		}
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 {
				return path + " must not have a key containing a NUL character (U+0000)"
			}
			if why := unstorableValue(path+"."+k, e, depth+1); why != "" {
				return why
			}
		}
	case []any:
		if depth > MetadataMaxDepth {
			return fmt.Sprintf("metadata must not nest deeper than %d levels", MetadataMaxDepth)
		}
		for i, e := range v {
			if why := unstorableValue(fmt.Sprintf("%s[%d]", path, i), e, depth+1); why != "" {
				return why
			}
		}
	}
	return ""
}
