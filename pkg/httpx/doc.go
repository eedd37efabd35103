// Package httpx holds the HTTP pieces every turnstile service shares: RFC 9457 problem documents
// with stable type URIs, and an http.Server hardened with read, write, idle and header limits.
package httpx
