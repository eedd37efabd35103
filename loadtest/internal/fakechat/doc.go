// Package fakechat is an OpenAI-compatible streaming chat server for load tests: every
// POST /v1/chat/completions with "stream": true is answered with a fixed number of content chunks
// at a fixed interval, in the wire format of OpenAI's chat.completion.chunk events and [DONE] (the
// same format the worker's agenttest.ChatServer plays, which the openai adapter's conformance tests
// run against).
//
// Each token's text is "<index>@<unix nanoseconds when it was written> ", so a reader at the other
// end of the platform (an SSE client of the gateway) can check that every token arrived, in order,
// and measure the time from the model writing a token to the browser reading it. The load
// generator runs it in a process of its own (turnstile-loadtest -serve-chat), so the model's CPU
// is not charged to the worker measured.
package fakechat
