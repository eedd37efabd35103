// Package rpc is the A2A front door's HTTP layer: the JSON-RPC endpoint (POST /a2a) in front of the
// a2a-go SDK's JSON-RPC transport (a2asrv.NewJSONRPCHandler), which dispatches to package tasks.
//
// The SDK does the protocol's dispatch, marshalling and SSE framing; this package adds what a
// queue-backed server needs and the SDK of protocol 0.3 does not do:
//
//   - With TURNSTILE_AUTH=on it authenticates a request before reading any of it: no key, a key
//     without the shape of one, or a key intake refuses (GET /v1/whoami) is answered HTTP 401 with
//     a WWW-Authenticate Bearer challenge and a JSON-RPC server error (-32000) of id null,
//     whatever the method, the task ID's shape or whether the body parses; a key that cannot be
//     checked now is a 429/503 with Retry-After. A key intake accepted is not asked about again for
//     5s; every native call the request makes is authenticated by intake anyway.
//   - It answers a CORS preflight (OPTIONS) and marks every answer readable for the origins of
//     TURNSTILE_A2A_CORS_ORIGINS (none by default), with the headers A2A clients send
//     (Authorization, Content-Type, A2A-Version, A2A-Extensions, Last-Event-ID) and WWW-Authenticate
//     and Retry-After exposed; never credentials, as keys travel as bearer headers.
//   - It reads the request once (at most TURNSTILE_MAX_BODY bytes) and checks it before the SDK
//     sees it, answering JSON-RPC errors with the spec's codes: parse error (-32700: not JSON),
//     invalid request (-32600: not an object, jsonrpc other than the string "2.0", a method that
//     is not a non-empty string, an id that is neither string, number nor null, a member named
//     twice — which one was meant is a guess two parsers may make differently),
//     method not found (-32601), invalid params (-32602: params that are not the method's shape,
//     a message without messageId or parts, a task query without id, a member named twice within
//     params; the SDK would call these parse errors), and version not supported (-32009) for an
//     A2A-Version (header, or query parameter) whose Major.Minor is neither 0.3 nor 1.0.
//   - Notifications (a request without an id member) are run and never answered (HTTP 204, no
//     body), as JSON-RPC 2.0 says: a message is accepted as its turn without waiting for it
//     (message/stream too), a cancel or a push config change is made, a read is not made (it
//     would change nothing); an invalid one is not answered either. Only a refusal of the native
//     API keeps its status (429/503 with Retry-After, no body), so the client may send it again.
//   - A batch (a JSON array) is not run: A2A's JSON-RPC binding takes one request object per HTTP
//     request and the SDK servers refuse batches. It is answered as JSON-RPC 2.0 answers a batch,
//     an array with one Invalid Request (-32600) per element (with its id; notifications left out,
//     204 when nothing is left); an empty array is one Invalid Request.
//   - A request with A2A-Version 1.0 is protocol 1.0 (v1.go, v1ops.go): its params are the
//     method's request message of package a2apb (the types generated from the specification's
//     proto), decoded and its result encoded by the proto JSON mapping; each method runs on the
//     same handler of package tasks as its 0.3 counterpart (ListTasks on tasks.Handler.ListTasks),
//     its errors the JSON-RPC codes of 1.0's section 5.4 with a google.rpc.ErrorInfo in data.
//     Without the header, 1.0's method names that map one to one onto 0.3's (SendMessage,
//     SendStreamingMessage, GetTask, CancelTask, SubscribeToTask) are accepted with 0.3 bodies.
//   - The HTTP+JSON binding of 1.0 (rest.go) is served under RESTPath (/a2a/rest) with the same
//     checks in the same order (preflight, key, version), its routes mapped onto the same 1.0
//     methods, its errors google.rpc.Status bodies with the statuses of section 5.4. REST takes
//     its base path as a parameter, as the JSON-RPC endpoint's answers depend on no path, so an
//     agent's own prefix can mount both.
//   - Each SSE event carries the id package tasks gave it (the native event id, see tasks' doc)
//     instead of the SDK's random one, and streams get keep-alive comments every
//     TURNSTILE_KEEPALIVE; the stream's headers go out as soon as the stream is open, and a client
//     that does not read for TURNSTILE_GATEWAY_WRITE_TIMEOUT is dropped (it resubscribes).
//   - A refusal the native API answered with 429 or 503 (or 401, with its challenge) is answered
//     as that HTTP status with Retry-After and the JSON-RPC error as a plain JSON body, as long as nothing was written
//     yet, so overload stays an honest, retryable answer on streams too.
//
// It counts requests by method and outcome (turnstile_a2a_requests_total).
package rpc
