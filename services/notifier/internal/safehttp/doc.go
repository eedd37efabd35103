// Package safehttp is the notifier's outbound HTTP client, safe to point at URLs a tenant chose
// (SSRF). By default a destination must be https and every address it is dialled at must be
// public: the check runs in the dialer's Control hook, on the address actually connected to after
// resolution, so a name that resolves to a public address when validated and to a private one when
// dialled (DNS rebinding) is refused too. Redirects are not followed (a 3xx is an answer, and a
// failed delivery), and an answer's body is read to a small bound only.
//
// Networks in the allow-list (TURNSTILE_NOTIFIER_ALLOW_NETWORKS) may be reached although they are
// not public; http:// needs TURNSTILE_NOTIFIER_ALLOW_HTTP. Tests set both.
package safehttp
