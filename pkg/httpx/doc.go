// Package httpx holds the HTTP pieces every turnstile service shares: RFC 9457 problem documents
// with stable type URIs, and an http.Server hardened with read, write, idle and header limits that
// speaks HTTP/1.1 and HTTP/2 cleartext (h2c, prior knowledge) on one port, and the routes of an
// embedded Vite page (MountBundle).
package httpx
