// Package rpc is the A2A front door's HTTP layer: the JSON-RPC endpoint (POST /a2a) in front of the
// a2a-go SDK's JSON-RPC transport (a2asrv.NewJSONRPCHandler), which dispatches to package tasks.
//
// The SDK does the protocol's dispatch, marshalling and SSE framing; this package adds what a
// queue-backed server needs and the SDK of protocol 0.3 does not do:
//
//   - It reads the request once (at most TURNSTILE_MAX_BODY bytes) and checks it before the SDK
//     sees it, answering JSON-RPC errors with the spec's codes: parse error (-32700), invalid
//     request (-32600: not JSON-RPC 2.0, no method, an id that is neither string, number nor null),
//     method not found (-32601), invalid params (-32602: params that are not the method's shape,
//     a message without messageId or parts, a task query without id; the SDK would call these
//     parse errors), and version not supported (-32009) for an A2A-Version header other than 0.3.
//   - It accepts A2A 1.0's method names where they map one to one onto 0.3's (SendMessage,
//     SendStreamingMessage, GetTask, CancelTask, SubscribeToTask).
//   - Each SSE event carries the id package tasks gave it (the native event id, see tasks' doc)
//     instead of the SDK's random one, and streams get keep-alive comments every
//     TURNSTILE_KEEPALIVE; the stream's headers go out as soon as the stream is open, and a client
//     that does not read for TURNSTILE_GATEWAY_WRITE_TIMEOUT is dropped (it resubscribes).
//   - A refusal the native API answered with 429 or 503 (or 401) is answered as that HTTP status
//     with Retry-After and the JSON-RPC error as a plain JSON body, as long as nothing was written
//     yet, so overload stays an honest, retryable answer on streams too.
//
// It counts requests by method and outcome (turnstile_a2a_requests_total).
package rpc
