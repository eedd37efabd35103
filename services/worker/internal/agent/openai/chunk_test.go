package openai

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

var chunkSamples = []string{
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"content":" wor\"ld\\n\u00e9\ud83d\ude00"}}]}`,
	`{"choices":[{"delta":{"content":"caf` + "\xc3\xa9" + ` ` + "\xff" + `"}}]}`,
	`{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
	`{"choices":null}`,
	` { "choices" : [ { "delta" : { "content" : "a" } } , { "delta" : null } ] } `,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"q\":"}}]}}]}`,
	`{"choices":[{"delta":{"content":null,"tool_calls":[{"index":1,"function":{"arguments":"1}"}}]}}]}`,
	`{"error":{"message":"Rate limit reached. Please try again in 1.5s.","type":"requests","code":"rate_limit_exceeded"}}`,
	`{"error":{"message":"overloaded","type":"overloaded_error","code":529}}`,
	`{"Choices":[{"delta":{"content":"folded key"}}]}`,
	`{"choices":[{"Delta":{"content":"folded"}}]}`,
	`{"choices":[{"delta":{"CONTENT":"folded"}}]}`,
	`{"cho\u0069ces":[{"delta":{"content":"escaped key"}}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":{"delta":{}}}`,
	`{"choices":[null]}`,
	`{"choices":[{"delta":"text"}]}`,
	`{"choices":[{"finish_reason":3}]}`,
	`{"usage":{"prompt_tokens":"x"}}`,
	`{"error":"plain"}`,
	`{"extra":{"nested":[1,{"a":"}"}],"s":"]"},"choices":[{"delta":{"content":"after"}}]}`,
	`[]`,
	`"text"`,
	`null`,
	`{"choices":[{"delta":{"content":"unterminated"}}]`,
	`not json`,
	``,
}

// TestDecodeChunk checks that decodeChunk decodes every sample as json.Unmarshal does: the same
// chunk, or an error exactly when json.Unmarshal gives one.
func TestDecodeChunk(t *testing.T) {
	t.Parallel()
	for _, sample := range chunkSamples {
		requireDecodesAsUnmarshal(t, sample)
	}
}

func FuzzDecodeChunk(f *testing.F) {
	for _, sample := range chunkSamples {
		f.Add(sample)
	}
	f.Fuzz(func(t *testing.T, data string) { requireDecodesAsUnmarshal(t, data) })
}

func requireDecodesAsUnmarshal(t *testing.T, data string) {
	t.Helper()
	var want chunk
	wantErr := json.Unmarshal([]byte(data), &want)
	var got chunk
	err := decodeChunk(data, &got)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "input %q", data)
		return
	}
	require.NoError(t, err, "input %q", data)
	require.Equal(t, want, got, "input %q", data)
}

// BenchmarkDecodeChunk compares decodeChunk with json.Unmarshal on a content chunk as OpenAI
// streams it.
func BenchmarkDecodeChunk(b *testing.B) {
	data := chunkSamples[0]
	b.Run("Scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ch chunk
			if err := decodeChunk(data, &ch); err != nil || ch.Choices[0].Delta.Content != "Hello" {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ch chunk
			if err := json.Unmarshal([]byte(data), &ch); err != nil || ch.Choices[0].Delta.Content != "Hello" {
				b.Fatal(err)
			}
		}
	})
}

// TestSentBody checks that a request body gives its bytes and then lets go of them.
func TestSentBody(t *testing.T) {
	t.Parallel()
	body := &sentBody{b: []byte(`{"model":"m"}`)}
	got, err := io.ReadAll(body)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"m"}`, string(got))
	require.Nil(t, body.b, "the bytes are let go once read")
	require.NoError(t, body.Close())
}
