// Package web serves the useStream demo page at /langgraph/: a small React page built with vite
// from clients/langgraph (page/), whose bundle is committed here and embedded, so the binary needs
// no Node at build or run time. The page drives @langchain/langgraph-sdk's useStream hook,
// unmodified, against this role's LangGraph routes on the same origin, with reconnectOnMount, so a
// reload mid-run rejoins the run. Rebuild it with `cd clients/langgraph && npm run build`; a test in
// cmd/turnstile/integration fails when the committed bundle is not what the sources build.
package web
