// Package console serves the operator console at /console/: the vite build of clients/console,
// committed under dist/ and embedded, so the binary needs no Node at build or run time. The page
// speaks only the admin API (/v1/admin/…) of the same origin, with the API key the operator pastes
// (kept in the tab's sessionStorage), and follows a turn live through the gateway's SSE with a
// stream token from POST /v1/admin/turns/{turn_id}/stream-token. clients/console's
// test/bundle.test.js (run by `make test` through TestConsoleBundle) fails when dist/ is not what
// `npm run build` makes from the sources and the lockfile.
//
// Intake serves it because intake owns the admin API: one origin, no CORS. The page's routes are
// in its URL fragment (/console/#/turns?status=failed), so the server serves one document.
package console
